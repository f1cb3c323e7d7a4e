"""Decision shapes: records the policy cannot tell apart get one decision.

What the disclosure decision reads of a record is computed from the compiled policy
(policy/readset.py). A record's shape is its policy view cut down to those paths, with
each instant the rules only set against the instant asked about replaced by its side
of that instant (before, at or after `now` and `as_of`, to the nanosecond, as OPA
parses them). Records of one shape get the decision OPA gives the shape's
representative: the record cut down to what is read (its own times), under an id
derived from the shape. The policy cannot tell the representative from any record of
the shape: it reads nothing else, and uses the id only as the key of the decision
(anything else about the id makes the read set unbounded: no shapes).

A record has no shape (it is decided alone) when one of its instants is not a time
OPA and this module read alike (policy/cache.py keeps such records out of the cache).
docs/design.md "Deciding shapes" says why this is sound; tests/oracle/test_shapes.py
and tests/oracle/test_readset.py check it on generated worlds and policies.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import orjson
from cachetools import LRUCache

from sidecar.policy.readset import STAR, Path, ReadSet

# RFC 3339 as OPA's time.parse_rfc3339_ns reads it, narrowed to what both read alike:
# Go also takes what this does not (then the record is decided alone), never less.
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:Z|([+-])([01]\d|2[0-3]):([0-5]\d))"
)
# Within the nanosecond range OPA parses into (int64 since 1970).
_YEARS = range(1678, 2262)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def rfc3339_ns(value: Any) -> int | None:
    """A time in nanoseconds since 1970, exactly as OPA parses it; None if unreadable."""
    if not isinstance(value, str):
        return None
    return _parsed(value)


# A record's times are read twice per request (its side, the cache's boundary check), and
# a store's records share many of them.
@functools.lru_cache(maxsize=8192)
def _parsed(value: str) -> int | None:
    found = _RFC3339.fullmatch(value)
    if found is None:
        return None
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = found.groups()
    if int(year) not in _YEARS:
        return None
    try:
        at = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=UTC
        )
    except ValueError:
        return None
    delta = at - _EPOCH
    seconds = delta.days * 86_400 + delta.seconds
    if sign is not None:
        offset = int(off_h) * 3600 + int(off_m) * 60
        seconds -= offset if sign == "+" else -offset
    return seconds * 1_000_000_000 + int((fraction or "").ljust(9, "0"))


@dataclass(frozen=True)
class Instants:
    """The question's instants, in nanoseconds, that a record's times are set against."""

    now_ns: int
    as_of_ns: int

    def side(self, value: Any) -> str | None:
        """Where a time falls (None: unreadable); null and absent are sides of their own."""
        if value is None:
            return "none"
        at = rfc3339_ns(value)
        if at is None:
            return None
        return _order(at, self.now_ns) + _order(at, self.as_of_ns)


def _order(at: int, instant: int) -> str:
    return "<" if at < instant else "=" if at == instant else ">"


@dataclass(frozen=True)
class Shape:
    """One record's shape: its digest (what the cache key is made of) and the view
    the policy is asked about for every record of the shape."""

    digest: bytes
    id: str
    representative: dict[str, Any]


class _Trie:
    """Paths as a tree: `whole` keeps everything below; `*` applies to every key."""

    def __init__(self) -> None:
        self.whole = False
        self.children: dict[str, _Trie] = {}

    def add(self, path: Path) -> None:
        node = self
        for part in path:
            if node.whole:
                return
            node = node.children.setdefault(part, _Trie())
        node.whole = True
        node.children = {}

    @cached_property
    def star(self) -> _Trie | None:
        return self.children.get(STAR)

    @cached_property
    def _merged(self) -> dict[str, _Trie]:
        # Made once per node (a Shaper's tries never change after it is made): a key
        # named both on its own and through `*` keeps both.
        star = self.star
        if star is None:
            return {}
        return {k: _merge(own, star) for k, own in self.children.items() if own is not star}

    def under(self, key: str) -> _Trie | None:
        """What is kept under `key` of an object: its own paths and every key's."""
        return self._merged.get(key) or self.children.get(key) or self.star


def _merge(a: _Trie, b: _Trie) -> _Trie:
    out = _Trie()
    out.whole = a.whole or b.whole
    if not out.whole:
        out.children = dict(a.children)
        for k, v in b.children.items():
            out.children[k] = _merge(out.children[k], v) if k in out.children else v
    return out


# Shapes a Shaper keeps, by view and sides (least recently used forgotten first).
SHAPES_KEPT = 4096


class Shaper:
    """Shapes under one read set (made once per policy revision).

    A shape is a function of the record's view and of the sides its times take of the
    instants asked about, nothing else: it is kept under exactly those (a digest of the
    view's JSON and the sides, in the order `_sided` visits them), so a record seen again,
    in another request at another `now`, is not projected, sided and digested again
    while its times keep their sides (docs/performance.md, round thirteen)."""

    def __init__(self, read_set: ReadSet) -> None:
        self.read_set = read_set
        self._kept = _Trie()
        for path in (*read_set.reads, *read_set.instants):
            self._kept.add(path)
        self._instants = read_set.instants
        self._known: LRUCache[tuple[bytes, tuple[str | None, ...]], Shape | None] = LRUCache(
            maxsize=SHAPES_KEPT
        )

    def shape_of(self, view: dict[str, Any], instants: Instants) -> Shape | None:
        """The record's shape, or None when it must be decided alone."""
        sides: list[str | None] = []
        for path in self._instants:
            _sides(view, path, instants, sides)
        try:
            # The view's digest, not its JSON: a kept shape costs the same whatever the
            # record holds (32 bytes, collision-resistant).
            raw = hashlib.blake2b(orjson.dumps(view), digest_size=32).digest()
        except TypeError:  # not JSON orjson writes: shaped each time, as before
            return self._shape_of(view, instants)
        key = (raw, tuple(sides))
        try:
            return self._known[key]
        except KeyError:
            pass
        found = self._shape_of(view, instants)
        self._known[key] = found
        return found

    def _shape_of(self, view: dict[str, Any], instants: Instants) -> Shape | None:
        representative = _project(view, self._kept)
        sided: Any = representative
        for path in self._instants:
            sided = _sided(sided, path, instants)
            if sided is None:
                return None
        digest = hashlib.sha256(orjson.dumps(sided, option=orjson.OPT_SORT_KEYS)).digest()
        shape_id = _digest_uuid(digest[:16])
        # The policy keys its answer by id: the shape's, since the record's is not read.
        return Shape(digest, shape_id, {**representative, "id": shape_id})


def _digest_uuid(raw: bytes) -> str:
    """`str(uuid.UUID(bytes=raw))`, without building the UUID (a fifth of a shape's time)."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _project(node: Any, kept: _Trie) -> Any:
    """`node` with only what `kept` reaches (a value other than an object or a list is
    kept as it is: what the policy reads of it is read whole)."""
    if kept.whole:
        return node
    if isinstance(node, dict):
        if kept.star is None:
            # Only the keys the policy names: a record holds many more than it reads.
            # A path read whole (most of them) is taken as it is, without a call.
            return {
                key: node[key] if below.whole else _project(node[key], below)
                for key, below in kept.children.items()
                if key in node
            }
        out = {}
        for key, value in node.items():
            below = kept.under(key)
            if below is not None:
                out[key] = _project(value, below)
        return out
    if isinstance(node, list) and kept.star is not None:
        return [_project(item, kept.star) for item in node]
    return node


def _sides(node: Any, path: Path, instants: Instants, out: list[str | None]) -> None:
    """The side of each time `_sided` replaces at `path`, in the order it visits them,
    appended to `out` (without copying anything). It follows `_sided` branch for branch:
    what the shape is kept under must hold every side the shape depends on."""
    if not path:
        out.append(instants.side(node))
        return
    head, rest = path[0], path[1:]
    if head == STAR:
        if isinstance(node, list):
            for item in node:
                _sides(item, rest, instants, out)
        elif isinstance(node, dict):
            for value in node.values():
                _sides(value, rest, instants, out)
        return
    if isinstance(node, dict) and head in node:
        _sides(node[head], rest, instants, out)


def _sided(node: Any, path: Path, instants: Instants) -> Any:
    """`node` with each time at `path` replaced by its side (None: one is unreadable).
    Copies only along the path it changes."""
    if not path:
        side = instants.side(node)
        return None if side is None else {"side": side}
    head, rest = path[0], path[1:]
    if head == STAR:
        if isinstance(node, list):
            items = [_sided(item, rest, instants) for item in node]
            return None if any(item is None for item in items) else items
        if isinstance(node, dict):
            values = {k: _sided(v, rest, instants) for k, v in node.items()}
            return None if any(v is None for v in values.values()) else values
        return node
    if not isinstance(node, dict) or head not in node:
        return node
    inner = _sided(node[head], rest, instants)
    return None if inner is None else {**node, head: inner}
