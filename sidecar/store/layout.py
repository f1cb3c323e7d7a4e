"""Which vectors a collection's points carry (`VectorLayout`), and how a Qdrant
create-collection request becomes one.

The whose collection holds the embedder's dense vector, unnamed, and the `lexical`
BM25 vector the store computes (store/vectors.py): `VectorLayout.whose(dim)`. A stack
collection (store/stacks.py) holds the stack's own vectors, kept and searched as sent:
dense vectors by name (any size Qdrant allows, any distance) and sparse vectors by name.
What a create request asks that whose cannot honour is refused by name
(`CollectionRefused`); tuning that changes no answer is accepted and left to whose's
own settings (docs/design.md, "Stack collections", lists each choice).

A sparse vector's `modifier` is recorded as sent and answered back, but the store
searches it without IDF: an inverse document frequency counts every point of the
collection, points the asker may not see among them, so it would let them move the
scores of points the asker may see.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import qdrant_edge as qe
from pydantic import ValidationError
from qdrant_client.http import models as qm

from sidecar.errors import CollectionRefused, InvalidRequest, QueryRefused, validation_reasons
from sidecar.record import has_usable_length
from sidecar.store.vectors import DENSE, LEXICAL

# Qdrant's own bound on a dense vector's dimension.
MAX_DIMENSION = 65536
# Vectors one collection may declare (dense and sparse together).
MAX_VECTORS = 16

_EDGE_DISTANCE = {
    qm.Distance.COSINE: qe.Distance.Cosine,
    qm.Distance.EUCLID: qe.Distance.Euclid,
    qm.Distance.DOT: qe.Distance.Dot,
    qm.Distance.MANHATTAN: qe.Distance.Manhattan,
}


@dataclass(frozen=True)
class DenseSpace:
    """One dense vector: its dimension and distance."""

    size: int
    distance: qm.Distance


@dataclass(frozen=True)
class VectorLayout:
    """The vectors of a collection's points.

    `dense`: by name ("" Qdrant's unnamed vector). `sparse`: by name, each with the
    modifier it was created with (recorded, never applied: see above).
    `computes_lexical`: the whose collection: the store computes the `lexical` vector
    of each record, and the embedder makes the dense one of a record written without
    it (`embeds`). A stack collection holds only what the stack sends. `single`: the
    dense vector was sent as one `VectorParams` (Qdrant's unnamed form), not by name
    (LangChain sends `{"": ...}`): each is answered back as it was sent."""

    dense: Mapping[str, DenseSpace]
    sparse: Mapping[str, qm.Modifier | None] = field(default_factory=dict)
    computes_lexical: bool = False
    single: bool = False

    @classmethod
    def whose(cls, dim: int) -> VectorLayout:
        """Today's whose collection: the embedder's cosine vector, and `lexical`."""
        return cls({DENSE: DenseSpace(dim, qm.Distance.COSINE)}, {LEXICAL: None}, True, True)

    @property
    def embeds(self) -> bool:
        """Whether a record written without a vector is embedded (by whose's embedder)."""
        return self.computes_lexical

    def names(self) -> frozenset[str]:
        return frozenset(self.dense) | frozenset(self.sparse)

    def given(self) -> frozenset[str]:
        """The names a writer may send vectors under (`lexical` is the store's own)."""
        return self.names() - ({LEXICAL} if self.computes_lexical else set())

    def require(self, names: Iterable[str]) -> None:
        """Refuse, in Qdrant's words, a vector name the collection does not have (the
        engines would fail less clearly, as an unavailable store)."""
        for name in sorted(set(names) - self.names()):
            raise QueryRefused(
                "bad_request", f"Wrong input: Not existing vector name error: {name}"
            )

    # --- a Qdrant create-collection request -------------------------------------------

    @classmethod
    def from_create_body(cls, raw: Any) -> VectorLayout:
        """`from_create` of a request body as sent (parsed JSON): keys Qdrant once
        took and qdrant-client's model no longer has are refused by name first."""
        if isinstance(raw, dict) and raw.get("init_from") is not None:
            raise CollectionRefused(
                "init_from", "init_from is not supported by whose: a collection starts empty"
            )
        try:
            body = qm.CreateCollection.model_validate(raw)
        except ValidationError as exc:
            reasons = validation_reasons(exc.errors(), raw)
            raise InvalidRequest("invalid create-collection request", reasons) from None
        return cls.from_create(body)

    @classmethod
    def from_create(cls, body: qm.CreateCollection) -> VectorLayout:
        """The layout a create-collection request asks for (CollectionRefused, naming
        the setting, for one whose cannot honour)."""
        if body.sharding_method == qm.ShardingMethod.CUSTOM:
            raise CollectionRefused(
                "sharding_method",
                "sharding_method custom is not supported by whose: shard keys are not served",
            )
        vectors = body.vectors
        named: Mapping[str, qm.VectorParams]
        if vectors is None:
            named = {}
        elif isinstance(vectors, qm.VectorParams):
            named = {DENSE: vectors}
        else:
            named = vectors
        dense = {name: _dense(name, params) for name, params in named.items()}
        sparse = {
            name: _sparse(name, params) for name, params in (body.sparse_vectors or {}).items()
        }
        for name in sparse:
            if name in dense:
                raise CollectionRefused(
                    "vector_name_twice", f"vector name `{name}` is both dense and sparse"
                )
        if len(dense) + len(sparse) > MAX_VECTORS:
            raise CollectionRefused(
                "too_many_vectors", f"a collection holds at most {MAX_VECTORS} named vectors"
            )
        if not dense and not sparse:
            raise CollectionRefused("no_vectors", "a collection needs a dense or a sparse vector")
        return cls(dense, sparse, False, isinstance(vectors, qm.VectorParams))

    # --- recorded with the collection ---------------------------------------------------

    def as_json(self) -> dict[str, Any]:
        return {
            "dense": {
                n: {"size": d.size, "distance": d.distance.value} for n, d in self.dense.items()
            },
            "sparse": {n: (m.value if m is not None else None) for n, m in self.sparse.items()},
            "computes_lexical": self.computes_lexical,
            "single": self.single,
        }

    @classmethod
    def from_json(cls, raw: Any) -> VectorLayout | None:
        if not isinstance(raw, dict):
            return None
        try:
            dense = {
                str(n): DenseSpace(int(d["size"]), qm.Distance(d["distance"]))
                for n, d in dict(raw["dense"]).items()
            }
            sparse = {
                str(n): (qm.Modifier(m) if m is not None else None)
                for n, m in dict(raw["sparse"]).items()
            }
            return cls(dense, sparse, bool(raw["computes_lexical"]), bool(raw["single"]))
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self) -> str:
        dense = ", ".join(
            f"{n or '(unnamed)'} {d.size} {d.distance.value}" for n, d in self.dense.items()
        )
        sparse = ", ".join(sorted(self.sparse))
        return f"dense [{dense}], sparse [{sparse}]"

    # --- as Qdrant answers it -------------------------------------------------------------

    def vectors_config(self) -> qm.VectorParams | dict[str, qm.VectorParams]:
        """The dense vectors as a create request sent them: the unnamed vector alone
        as one `VectorParams` (if so sent), else by name."""
        params = {
            n: qm.VectorParams(size=d.size, distance=d.distance) for n, d in self.dense.items()
        }
        if self.single:
            return params[DENSE]
        return params

    def sparse_config(self, *, as_sent: bool) -> dict[str, qm.SparseVectorParams]:
        """The sparse vectors: `as_sent` with their modifiers (what the collection's
        info answers), else as the store keeps them (no modifier)."""
        return {
            n: qm.SparseVectorParams(modifier=m if as_sent else None)
            for n, m in self.sparse.items()
        }

    def as_info(self) -> qm.CollectionInfo:
        """What GET /collections/{name} answers (Qdrant's `CollectionInfo`): the
        vectors as sent; no point count (it would count points the asker may not see)."""
        return qm.CollectionInfo(
            status=qm.CollectionStatus.GREEN,
            optimizer_status=qm.OptimizersStatusOneOf.OK,
            segments_count=1,
            points_count=None,
            indexed_vectors_count=None,
            config=qm.CollectionConfig(
                params=qm.CollectionParams(
                    vectors=self.vectors_config(),
                    sparse_vectors=self.sparse_config(as_sent=True) or None,
                    shard_number=1,
                    replication_factor=1,
                    write_consistency_factor=1,
                    on_disk_payload=True,
                ),
                hnsw_config=qm.HnswConfig(m=16, ef_construct=100, full_scan_threshold=10_000),
                optimizer_config=qm.OptimizersConfig(
                    deleted_threshold=0.2,
                    vacuum_min_vector_number=1000,
                    default_segment_number=0,
                    flush_interval_sec=5,
                ),
            ),
            payload_schema={},
        )

    # --- the embedded engine ---------------------------------------------------------------

    def edge_config(self, threads: int | None = None) -> qe.EdgeConfig:
        """The shard: every vector searched as stored (no IDF modifier); `threads`: its
        search threads (None: the engine's default)."""
        dense = {
            n: qe.EdgeVectorParams(size=d.size, distance=_EDGE_DISTANCE[d.distance])
            for n, d in self.dense.items()
        }
        vectors: qe.EdgeVectorParams | dict[str, qe.EdgeVectorParams] | None = dense or None
        if set(dense) == {DENSE}:
            vectors = dense[DENSE]
        sparse = {n: qe.EdgeSparseVectorParams() for n in self.sparse}
        return qe.EdgeConfig(
            vectors=vectors, sparse_vectors=sparse or None, max_search_threads=threads
        )

    # --- what a writer sent ----------------------------------------------------------------

    def problems(self, vectors: Mapping[str, Any]) -> list[str]:
        """Why the named `vectors` do not fit this layout (empty if they do)."""
        found: list[str] = []
        for name, vector in vectors.items():
            if self.computes_lexical and name == LEXICAL:
                found.append(f"vector_set_by_the_sidecar:{name}")
            elif name in self.dense:
                found += _dense_problems(name, vector, self.dense[name])
            elif name in self.sparse:
                found += _sparse_problems(name, vector)
            else:
                found.append(f"vector_name_unknown:{name}")
        return found


def _dense(name: str, params: qm.VectorParams) -> DenseSpace:
    where = f"vector `{name}`" if name else "the vector"
    if params.multivector_config is not None:
        raise CollectionRefused(
            "multivector_config", f"{where}: multivectors are not supported by whose"
        )
    if params.datatype not in (None, qm.Datatype.FLOAT32):
        raise CollectionRefused(
            "datatype",
            f"{where}: datatype {params.datatype.value} is not supported by whose (float32 only)",
        )
    if not 1 <= params.size <= MAX_DIMENSION:
        raise CollectionRefused(
            "vector_size", f"{where}: size must be between 1 and {MAX_DIMENSION}"
        )
    return DenseSpace(params.size, params.distance)


def _sparse(name: str, params: qm.SparseVectorParams) -> qm.Modifier | None:
    index = params.index
    if index is not None and index.datatype not in (None, qm.Datatype.FLOAT32):
        raise CollectionRefused(
            "datatype",
            f"sparse vector `{name}`: datatype {index.datatype.value} is not supported by whose"
            " (float32 only)",
        )
    return params.modifier


def _dense_problems(name: str, vector: Any, space: DenseSpace) -> list[str]:
    if not isinstance(vector, list):
        return [f"vector_must_be_dense:{name}"]
    if len(vector) != space.size:
        suffix = f":{name}" if name else ""
        return [f"vector_dimension_must_be_{space.size}{suffix}"]
    if not all(isinstance(x, int | float) and math.isfinite(x) for x in vector):
        return [f"vector_not_finite:{name}"]
    cosine = space.distance == qm.Distance.COSINE
    if cosine and not has_usable_length([float(x) for x in vector]):
        return [f"vector_length_unusable:{name}"]
    return []


def _sparse_problems(name: str, vector: Any) -> list[str]:
    if not isinstance(vector, qm.SparseVector):
        return [f"vector_must_be_sparse:{name}"]
    indices, values = list(vector.indices), list(vector.values)
    if (
        len(indices) != len(values)
        or len(set(indices)) != len(indices)
        or any(i < 0 or i >= 2**32 for i in indices)
        or not all(math.isfinite(v) for v in values)
    ):
        return [f"sparse_vector_invalid:{name}"]
    return []
