"""Decision shapes: records the policy cannot tell apart get one decision.

Most candidates of a recall differ only in what the disclosure policy never reads
(their id, when they were stored, their source id, what they were derived from) and in
times the policy only sets against the instant asked about. The policy says which
fields those are (`data.whose.disclosure.shape`, returned with every batch):

- `ignores`: paths no disclosure rule reads (`provenance.derived_from`; a path through
  a list reaches each item's field, `evidence.at`);
- `instants`: paths to times the rules only compare with the instant asked about
  (`as_of`, which defaults to `now`).

A record's shape is its policy view without the ignored fields, with each instant
replaced by which side of the question's instants it falls on. Records of one shape
get the decision OPA gave the shape's representative: the first such record, asked
about without its ignored fields and under an id derived from the shape, so that the
policy cannot decide on what it said it does not read. Decisions are cached per shape
(policy/cache.py): the steady state asks OPA only about shapes it has not seen.

A record has no shape (it is decided alone, as before) when the policy declares none,
when one of its instants is unreadable, or when one falls within the cache's time
bucket (its side of `now` may change while the entry lives). The declaration is held
to the policy's own text before it is used (policy/shape_guard.py), and the equivalence,
per shape against per record, is checked on generated worlds (tests/oracle/test_shapes.py);
docs/design.md "Deciding shapes" says what a policy author promises with the lists.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

Path = tuple[str, ...]


@dataclass(frozen=True)
class ShapeSpec:
    """What the policy said it reads: its `shape` rule, parsed."""

    ignores: tuple[Path, ...]
    instants: tuple[Path, ...]

    @staticmethod
    def parse(raw: Any) -> ShapeSpec | None:
        """The policy's declaration, or None (no shapes: every record is decided alone)
        when there is none or it is not what this module reads."""
        if not isinstance(raw, dict):
            return None
        paths: dict[str, tuple[Path, ...]] = {}
        for name in ("ignores", "instants"):
            listed = raw.get(name, [])
            if not isinstance(listed, list) or not all(
                isinstance(p, str) and p and all(p.split(".")) for p in listed
            ):
                return None
            paths[name] = tuple(tuple(p.split(".")) for p in sorted(set(listed)))
        return ShapeSpec(paths["ignores"], paths["instants"])


@dataclass(frozen=True)
class Shape:
    """One record's shape: its digest (what the cache key is made of) and the view
    the policy is asked about for every record of the shape."""

    digest: bytes
    id: str
    representative: dict[str, Any]


@dataclass(frozen=True)
class Instants:
    """The question's instants a record's times are set against: the explicit as_of,
    if any, and the cache bucket `now` falls in."""

    as_of: float | None
    bucket_start: float
    bucket_end: float

    def side(self, value: Any) -> str | None:
        """Where a time falls (None: unreadable, or inside the bucket)."""
        if value is None:
            return "none"
        try:
            at = datetime.fromisoformat(value).timestamp()
        except (TypeError, ValueError):
            return None
        if self.bucket_start <= at <= self.bucket_end:
            return None
        side = "before" if at < self.bucket_start else "after"
        if self.as_of is not None:
            side += "<" if at < self.as_of else "=" if at == self.as_of else ">"
        return side


def shape_of(view: dict[str, Any], spec: ShapeSpec, instants: Instants) -> Shape | None:
    """The record's shape under `spec`, or None when it must be decided alone."""
    representative = view
    for path in spec.ignores:
        representative = _without(representative, path)
    sided = representative
    for path in spec.instants:
        sided = _sided(sided, path, instants)
        if sided is None:
            return None
    digest = hashlib.sha256(orjson.dumps(sided, option=orjson.OPT_SORT_KEYS)).digest()
    shape_id = str(uuid.UUID(bytes=digest[:16]))
    # The policy keys its answer by id: the shape's, since the record's is not read.
    return Shape(digest, shape_id, {**representative, "id": shape_id})


# Both copy only along the path they change: the view they are given is not touched,
# and the rest of it is shared (a shape is made per candidate, on the request path).


def _without(node: Any, path: Path) -> Any:
    """`node` without what `path` reaches."""
    if isinstance(node, list):
        return [_without(item, path) for item in node]
    if not isinstance(node, dict) or path[0] not in node:
        return node
    if len(path) == 1:
        return {k: v for k, v in node.items() if k != path[0]}
    return {**node, path[0]: _without(node[path[0]], path[1:])}


def _sided(node: Any, path: Path, instants: Instants) -> Any:
    """`node` with each time at `path` replaced by its side (None: one has none)."""
    if isinstance(node, list):
        items = [_sided(item, path, instants) for item in node]
        return None if any(item is None for item in items) else items
    if not isinstance(node, dict) or path[0] not in node:
        return node
    if len(path) > 1:
        inner = _sided(node[path[0]], path[1:], instants)
        return None if inner is None else {**node, path[0]: inner}
    side = instants.side(node[path[0]])
    return None if side is None else {**node, path[0]: {"side": side}}
