"""The vectors a point carries, and what the collection records about them.

Each point has two: the dense embedding under Qdrant's default (unnamed) vector, so
a plain dense vector from an unmodified qdrant-client means it, and the lexical BM25
vector under `lexical` (embed/lexical.py), computed by the store from what is indexed
for the record (embed/indexed.py).

The collection records which embedder made its dense vectors, their dimension, and the
lexical encoder (`IndexSpec`): vectors of two models are not comparable, so a sidecar
configured with another model refuses to open the store and says so in one line
(`whose reindex` re-embeds a store for a new model).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sidecar.embed.indexed import indexed_parts
from sidecar.embed.lexical import ENCODER, Sparse
from sidecar.embed.lexical import NAME as LEXICAL_NAME

DENSE = ""
LEXICAL = "lexical"
# Where the spec is recorded: the server collection's metadata, or beside the shard.
SPEC_KEY = "whose_index"
# Where a stack collection's vector layout is recorded (store/layout.py), likewise.
LAYOUT_KEY = "whose_layout"


@dataclass(frozen=True)
class IndexSpec:
    embedder: str
    dim: int
    lexical: str = LEXICAL_NAME

    @classmethod
    def hashing(cls, dim: int) -> IndexSpec:
        return cls("hashing-v1", dim)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Any) -> IndexSpec | None:
        if not isinstance(raw, dict):
            return None
        try:
            return cls(str(raw["embedder"]), int(raw["dim"]), str(raw["lexical"]))
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self) -> str:
        return f"{self.embedder} ({self.dim} dimensions, lexical {self.lexical})"


class IndexMismatch(ValueError):
    """The store was made for other vectors than this sidecar makes: refuse to open."""


def check(where: str, recorded: IndexSpec | None, wanted: IndexSpec) -> None:
    """One line, naming both sides and the way out, unless the two agree."""
    if recorded is None:
        raise IndexMismatch(
            f"{where} records no embedding model (made by an earlier version of whose): "
            f"run `whose reindex` to index it for {wanted.describe()}"
        )
    if recorded != wanted:
        raise IndexMismatch(
            f"{where} holds vectors of {recorded.describe()}, but this sidecar is configured "
            f"for {wanted.describe()}: configure the recorded model, or run `whose reindex`"
        )


def lexical(payload: dict[str, Any]) -> Sparse:
    """The record's lexical vector, from what is indexed for it: its own words only."""
    return ENCODER.document(*indexed_parts(payload))


def dense(vector: Any) -> list[float] | None:
    """The dense vector among what a backend returned (a list, or named vectors)."""
    if isinstance(vector, dict):
        vector = vector.get(DENSE)
    return list(vector) if isinstance(vector, list) else None
