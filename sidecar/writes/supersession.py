"""Supersession: a holder's new view of a proposition replaces their earlier one.

A chain is one holder's successive views of one proposition, told to one
audience: (tenant, holder, observed, proposition key, audience, access scope).
The holder is the record's observer. A claim without one (world state) is held
by its voice: the speaker whose words it records (`source.speaker`), else the
writer that asserted it; so nobody else's write replaces an authority's fact,
and two speakers relayed by one extractor keep two chains.

The audience and scope are part of the chain so that every version of a chain
is seen by exactly the same people: whoever may see one version may see its
links, its end and its status, and a version nobody in an answer may see never
changes anything in that answer (docs/security.md). A holder who tells someone
else what they think starts a chain for that audience; their private notes keep
their own.

Versions are ordered by valid time. A new version normally starts after the
current one and supersedes it: the new one names it in `supersedes`, the old one
gets `invalid_at` and `superseded_by`, nothing is deleted. A version that starts
before the current one (a conversation processed late) is inserted where its
valid time puts it, between the version that applied then and the one after it:
whether a write is stored never depends on versions the writer may not see.

Everything here is pure: the writer reads the chain under its lock (writes/writer.py),
this module decides what to change, the writer applies it. New records are
stored first, carrying their links, and the records they sit beside are updated
after; a process that dies in between leaves a stored record whose neighbours do
not point back at it. That record is the evidence: `plan` relinks its
neighbours whenever it is given it (`successors`: stored records whose
`supersedes` names a record it was given; the writer fetches them where
`possibly_left_open` says a write may have been cut short, `whose repair` for a
whole tenant), and only then places whatever a chain still has open twice where
its valid time puts it: a fork, from a version the store applied after its
writer had given up and let go of the lock (so the next writer superseded the
same head), or from writers that did not share locks (docs/design.md §4).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sidecar.record import Payload, valid_time_covers
from sidecar.store.scope import Absent, Condition, Exactly, Match, Scope

# How far a version without a valid_at of its own may move forward to follow its
# predecessor (clocks of replicas disagree a little); beyond it, it is inserted
# before that predecessor, at the instant it was stored.
CLOCK_SKEW = timedelta(seconds=5)


@dataclass(frozen=True)
class Chain:
    """One holder's successive views of one proposition, told to one audience."""

    tenant: str
    observer: str | None
    observed: str | None
    key: str
    # The voice of a claim without an observer: whoever the source says spoke,
    # else the writer that asserted it.
    writer: str | None = None
    speaker: str | None = None
    audience: tuple[str, ...] = ()
    scope: str | None = None
    # A nested view's whole chain of minds (observed_path), when it is two or more.
    path: tuple[str, ...] = ()

    def lock_key(self) -> str:
        parts = (self.tenant, self.observer, self.observed, self.key, self.writer, self.speaker)
        return (
            "\x00".join([*(part or "" for part in parts), "\x01".join(self.audience)])
            + (f"\x00{self.scope}" if self.scope else "")
            + (f"\x02{chr(1).join(self.path)}" if self.path else "")
        )

    def versions(self, **narrower: Any) -> Scope:
        """Every stored version of this chain (optionally narrowed, e.g. current_at)."""
        extra: list[Condition] = [Exactly("audience", self.audience)]
        extra.append(Match("access_scope", self.scope) if self.scope else Absent("access_scope"))
        absent = list(narrower.pop("absent", ()))
        if self.observer is None:
            absent.append("observer_id")
            if self.speaker is not None:
                extra.append(Match("source.speaker", self.speaker))
            else:
                absent.append("source.speaker")
                extra.append(Match("provenance.writer", self.writer or ""))
        if self.observed is None:
            absent.append("observed_id")
        if self.path:
            # Which minds, not in which order: the writer keeps the versions of this
            # very chain (`of_chain`).
            extra += [Match("observed_path", mind) for mind in sorted(set(self.path))]
        else:
            absent.append("observed_path")
        return Scope(
            tenant=self.tenant,
            about=self.key,
            observer=self.observer,
            observed=self.observed,
            absent=tuple(absent),
            extra=tuple(extra),
            **narrower,
        )

    def open_versions(self) -> Scope:
        return self.versions(absent=("invalid_at",))

    def applying_at(self, instant: datetime) -> Scope:
        return self.versions(current_at=instant)

    def firsts(self) -> Scope:
        """Versions that supersede nothing: in a whole chain, its first."""
        return self.versions(absent=("supersedes",))


def predecessor_lock_key(record_id: str) -> str:
    """The lock held to supersede, or to close, the keyless version `record_id`.

    The bare id, as every running writer spells it (a different key would let an
    older replica and a newer one both supersede one version during a rollout).
    """
    return record_id


def chain_of(record: Payload) -> Chain | None:
    key = (record.get("proposition") or {}).get("key")
    if not key:
        return None
    observer = record.get("observer_id")
    speaker = None if observer else (record.get("source") or {}).get("speaker")
    writer = None if observer or speaker else (record.get("provenance") or {}).get("writer")
    return Chain(
        record["tenant"],
        observer,
        record.get("observed_id"),
        key,
        writer,
        speaker,
        tuple(sorted(set(record.get("audience") or ()))),
        record.get("access_scope"),
        tuple(record.get("observed_path") or ()),
    )


def of_chain(chain: Chain, records: Iterable[Payload]) -> list[Payload]:
    """The records that are versions of `chain` (a store filter can match a nested
    view's minds, not their order)."""
    return [r for r in records if chain_of(r) == chain]


@dataclass(eq=False)
class Version:
    """A record as supersession places it: the payload it is stored with (links are
    set on it in place), and what `plan` compares, parsed once."""

    payload: Payload
    id: str
    chain: Chain | None
    valid_at: datetime
    invalid_at: datetime | None
    # The commit time as stored (an ISO string, or the order a test gives).
    recorded_at: str

    @classmethod
    def of(cls, payload: Payload) -> Version:
        ended = payload.get("invalid_at")
        return cls(
            payload,
            str(payload["id"]),
            chain_of(payload),
            datetime.fromisoformat(payload["valid_at"]),
            None if ended is None else datetime.fromisoformat(ended),
            str(payload.get("recorded_at", "")),
        )

    @property
    def supersedes(self) -> str | None:
        named = self.payload.get("supersedes")
        return None if named is None else str(named)

    @property
    def superseded_by(self) -> str | None:
        named = self.payload.get("superseded_by")
        return None if named is None else str(named)

    @property
    def is_open(self) -> bool:
        return self.invalid_at is None

    def applied_at(self, instant: datetime) -> bool:
        return valid_time_covers(self.valid_at, self.invalid_at, instant)

    def set(self, fields: Payload) -> None:
        self.payload.update(fields)
        if "valid_at" in fields:
            self.valid_at = datetime.fromisoformat(fields["valid_at"])
        if "invalid_at" in fields:
            self.invalid_at = datetime.fromisoformat(fields["invalid_at"])


def versions_of(payloads: Iterable[Payload]) -> list[Version]:
    return [Version.of(p) for p in payloads]


def _same_holder(previous: Version, record: Version) -> bool:
    """Keyless records: one holder's line, told to one audience."""
    before, now = previous.payload, record.payload
    for name in ("observer_id", "observed_id", "observed_path", "access_scope"):
        if before.get(name) != now.get(name):
            return False
    if set(before.get("audience") or ()) != set(now.get("audience") or ()):
        return False
    if now.get("observer_id") is None:
        return bool(_voice(before)) and _voice(before) == _voice(now)
    return True


def _voice(record: Payload) -> str | None:
    voice = (record.get("source") or {}).get("speaker") or (record.get("provenance") or {}).get(
        "writer"
    )
    return str(voice) if voice else None


@dataclass
class Plan:
    # (record id, fields to set) on records already stored, applied after the new ones.
    updates: list[tuple[str, Payload]] = field(default_factory=list)
    # (batch index, reason) for records that cannot be written as asked.
    problems: list[tuple[int, str]] = field(default_factory=list)

    def set(self, record: Version, fields: Payload, stored: bool) -> None:
        record.set(fields)
        if stored:
            self.updates.append((record.id, fields))


def plan(
    new: Sequence[Version],
    open_versions: Mapping[Chain, Sequence[Version]],
    named: Mapping[str, Version],
    *,
    undated: frozenset[str] | set[str] = frozenset(),
    successors: Sequence[Version] = (),
    around: Sequence[Version] = (),
    blind: frozenset[str] | set[str] = frozenset(),
) -> Plan:
    """Link each new record into its chain; sets the links on the new versions.

    `open_versions` holds the stored versions without invalid_at of every chain
    the batch touches; `around` holds, for new versions that start before their
    chain's head and for the open versions of a chain with two, the stored
    versions that applied then, those after them, and the chain's first (and
    what those open versions name); `named` holds stored records that keyless new records name
    in `supersedes`; `undated` holds ids of new records whose valid_at was not
    given, which may move forward to a readable predecessor's (clock skew between
    replicas); `blind` holds ids of new records the writer may not read (nothing
    it may not read decides their fate, and they may not name what to supersede);
    `successors` holds stored records whose `supersedes` names one of the stored
    records above (at least those `possibly_left_open` lists). With no new
    records, the plan is a repair.
    """
    result = Plan()
    stored = _distinct([r for vs in open_versions.values() for r in vs], around, named.values())
    _relink_cut_short(stored, successors, result)
    stored = _distinct(stored, successors)
    stored_ids = {r.id for r in stored}
    known: dict[Chain, list[Version]] = defaultdict(list)
    for record in stored:
        if record.chain is not None:
            known[record.chain].append(record)
    heads = {
        chain: _repair(versions, known[chain], result) for chain, versions in open_versions.items()
    }
    claimed: set[str] = set()
    # A chain's new versions in valid-time order; a keyless record where it stands.
    order = sorted(range(len(new)), key=lambda i: (new[i].chain is not None, new[i].valid_at))
    for index in order:
        record = new[index]
        chain = record.chain
        if chain is None:
            reason = _keyless(record, named, claimed, undated, blind, result)
        else:
            reason = _keyed(record, chain, heads, known[chain], undated, blind, stored_ids, result)
        if reason is None and record.invalid_at is not None and record.invalid_at < record.valid_at:
            # A start chosen at commit time (or moved to follow the predecessor)
            # can pass the end the caller gave.
            reason = "invalid_at_before_valid_at"
        if reason is not None:
            result.problems.append((index, reason))
    result.problems.sort()
    return result


def _keyed(
    record: Version,
    chain: Chain,
    heads: dict[Chain, Version | None],
    versions: list[Version],
    undated: frozenset[str] | set[str],
    blind: frozenset[str] | set[str],
    stored_ids: set[str],
    result: Plan,
) -> str | None:
    """Append the record to its chain, or insert it where its valid time falls."""
    head = heads.get(chain)
    if (
        head is not None
        and head.valid_at > record.valid_at
        and record.id in undated
        and record.id not in blind
        and head.valid_at - record.valid_at <= CLOCK_SKEW
    ):
        # Stored after its predecessor, in lock order, by a replica whose clock is a
        # little behind: it follows that predecessor rather than slip before it.
        record.set({"valid_at": head.payload["valid_at"]})
    wanted = record.supersedes
    if wanted is not None:
        # Naming what to replace asserts something about a version: only one the
        # writer may read, and only the current one. One reason for missing, someone
        # else's and already replaced: the writer learns nothing it could not see.
        if record.id in blind or head is None or wanted != head.id:
            return "cannot_supersede"
        if head.valid_at > record.valid_at:
            return "valid_at_before_current_version"
    if head is None or head.valid_at <= record.valid_at:
        if head is not None:
            record.set({"supersedes": head.id})
            result.set(head, _closed_by(record), stored=head.id in stored_ids)
        heads[chain] = record
    else:
        _insert(record, versions, stored_ids, result)
    versions.append(record)
    return None


def _insert(record: Version, versions: list[Version], stored_ids: set[str], result: Plan) -> None:
    """Place a version between the one that applied at its start and the next."""
    by_id = {v.id: v for v in versions}
    applying = [v for v in versions if v.applied_at(record.valid_at)]
    previous = max(applying, key=_stored_order, default=None)
    following = by_id.get(previous.superseded_by or "") if previous is not None else None
    if following is None:
        later = [v for v in versions if v.valid_at > record.valid_at and v is not previous]
        following = min(later, key=_stored_order, default=None)
    if previous is not None:
        record.set({"supersedes": previous.id})
        result.set(previous, _closed_by(record), stored=previous.id in stored_ids)
    if following is not None:
        record.set(_closed_by(following))
        result.set(following, {"supersedes": record.id}, stored=following.id in stored_ids)


def _keyless(
    record: Version,
    named: Mapping[str, Version],
    claimed: set[str],
    undated: frozenset[str] | set[str],
    blind: frozenset[str] | set[str],
    result: Plan,
) -> str | None:
    """A keyless record replaces only what it names: the same holder's open, keyless
    version, told to the same audience, which the writer may read."""
    wanted = record.supersedes
    if wanted is None:
        return None
    previous = named.get(wanted)
    if (
        previous is None
        or record.id in blind
        or previous.id in claimed  # a second successor would fork the line
        or not previous.is_open
        or previous.chain is not None  # keyed versions live in chains
        or not _same_holder(previous, record)
    ):
        return "cannot_supersede"
    if previous.valid_at > record.valid_at:
        if not (record.id in undated and previous.valid_at - record.valid_at <= CLOCK_SKEW):
            return "valid_at_before_current_version"
        record.set({"valid_at": previous.payload["valid_at"]})
    if record.invalid_at is not None and record.invalid_at < record.valid_at:
        return "invalid_at_before_valid_at"
    claimed.add(previous.id)
    result.set(previous, _closed_by(record), stored=True)
    return None


def possibly_left_open(
    open_versions: Mapping[Chain, Sequence[Version]],
    named: Mapping[str, Version],
    around: Iterable[Version] = (),
) -> list[str]:
    """Ids of stored records a write cut short may have left unlinked from a successor.

    A cut-short append always leaves its chain with two open versions (the old
    head and the batch's last), so a chain with one needs no look; a keyless
    version shows nothing, so every open one a new record names is looked at, and
    so is every version a backdated write will sit beside. The common write (one
    open version, nothing named, nothing backdated) needs no lookup.
    """
    suspects = [r.id for versions in open_versions.values() if len(versions) > 1 for r in versions]
    suspects += [r.id for r in named.values() if r.is_open and r.chain is None]
    suspects += [r.id for r in around]
    return list(dict.fromkeys(suspects))


def _relink_cut_short(stored: list[Version], successors: Sequence[Version], result: Plan) -> None:
    """Repair what a write cut short left: a stored version its neighbours skip.

    A new version is stored naming both neighbours before they are updated. If its
    predecessor still ends after it starts, without naming it, the write stopped
    before closing that predecessor: it now ends where the new version starts.
    If the version after it still names the new version's predecessor (or nothing),
    the write stopped before relinking it: it now names the new version.
    """
    known = _distinct(stored, successors)
    by_id = {r.id: r for r in known}
    named_by: dict[str, list[Version]] = defaultdict(list)
    for successor in successors:
        named_by[str(successor.supersedes)].append(successor)
    for record in stored:
        follows = _earliest(s for s in named_by[record.id] if _skipped(record, s))
        if follows is not None:
            result.set(record, _closed_by(follows), stored=True)
    for record in known:
        later = by_id.get(str(record.superseded_by))
        if later is not None and _names_an_earlier_predecessor(later, record, by_id):
            result.set(later, {"supersedes": record.id}, stored=True)


def _names_an_earlier_predecessor(
    later: Version, record: Version, by_id: dict[str, Version]
) -> bool:
    """`record` names `later` as its successor, but `later` names nothing, or a
    version that starts before `record`: `record` was inserted and `later` never
    heard. (A predecessor `later` names that is not at hand proves nothing.)"""
    named = later.supersedes
    if named == record.id or later.chain != record.chain or later.valid_at < record.valid_at:
        return False
    if named is None:
        return True
    predecessor = by_id.get(named)
    return predecessor is not None and predecessor.valid_at <= record.valid_at


def _skipped(previous: Version, successor: Version) -> bool:
    """Only a link the writer could have made is trusted: same line, not earlier,
    and the predecessor still covers the successor's start."""
    chain = previous.chain
    if successor.chain != chain or (chain is None and not _same_holder(previous, successor)):
        return False
    if successor.id == previous.id or previous.superseded_by == successor.id:
        return False
    if successor.valid_at < previous.valid_at:
        return False
    return previous.invalid_at is None or previous.invalid_at > successor.valid_at


def _earliest(candidates: Iterable[Version]) -> Version | None:
    # Two successors of one version is a fork made before writers checked for
    # one; the first continues the line.
    return min(candidates, key=_stored_order, default=None)


def _stored_order(record: Version) -> tuple[datetime, str, str]:
    return record.valid_at, record.recorded_at, record.id


def _repair(versions: Sequence[Version], known: list[Version], result: Plan) -> Version | None:
    """Place each of a chain's still open versions but the latest where its valid time
    puts it, among the `known` versions of the chain; returns the head.

    Such a version is one its neighbours never heard of: a version a store applied
    after its writer gave up and let go of the lock, so the next writer superseded
    the same head (a fork), or one from writers that did not share locks. Closing it
    by the next open version alone would relink that one away from the predecessor
    still naming it (docs/design.md §4)."""
    still_open = [r for r in versions if r.is_open]
    open_ids = {r.id for r in still_open}

    def age(r: Version) -> tuple[datetime, str, bool]:
        # On a tie in time, a version that names another open one is the newer.
        return r.valid_at, r.recorded_at, r.supersedes in open_ids

    ordered = sorted(still_open, key=age)
    chain = _distinct(known, still_open) if len(ordered) > 1 else []
    for left in ordered[:-1]:
        _place(left, [v for v in chain if v.id != left.id], age, result)
    return ordered[-1] if ordered else None


def _place(
    left: Version, others: list[Version], age: Callable[[Version], Any], result: Plan
) -> None:
    """Put a stored version left open between the version that applied at its start
    and the one after (as `_insert` does for a new one). Each link is made before the
    version it closes, so a repair cut short leaves the evidence the next one reads:
    a stored version naming one that still covers its start, or is still open."""
    by_id = {v.id: v for v in others}
    older = [v for v in others if age(v) < age(left)]
    previous = max((v for v in older if v.applied_at(left.valid_at)), key=age, default=None)
    following = by_id.get(previous.superseded_by or "") if previous is not None else None
    if following is None or age(following) <= age(left):
        following = min((v for v in others if age(v) > age(left)), key=age, default=None)
    if previous is not None:
        if left.supersedes != previous.id:
            result.set(left, {"supersedes": previous.id}, stored=True)
        _close(previous, left, result)
    if following is not None:
        if following.supersedes != left.id:
            result.set(following, {"supersedes": left.id}, stored=True)
        _close(left, following, result)


def _close(record: Version, successor: Version, result: Plan) -> None:
    fields = _closed_by(successor)
    if any(record.payload.get(name) != value for name, value in fields.items()):
        result.set(record, fields, stored=True)


def _closed_by(successor: Version) -> Payload:
    return {"invalid_at": successor.payload["valid_at"], "superseded_by": successor.id}


def _distinct(*groups: Iterable[Version]) -> list[Version]:
    seen: dict[str, Version] = {}
    for group in groups:
        for record in group:
            seen.setdefault(record.id, record)
    return list(seen.values())


def chains(records: Iterable[Version]) -> dict[Chain, list[Version]]:
    """Group keyed records by chain (for `whose repair`)."""
    grouped: dict[Chain, list[Version]] = defaultdict(list)
    for record in records:
        if record.chain is not None:
            grouped[record.chain].append(record)
    return grouped
