"""Supersession: a holder's new view of a proposition replaces their current one.

A chain is one holder's successive views of one proposition: (tenant, observer,
observed, proposition key). Its current version is the one without invalid_at.
A new record in a chain supersedes the current version: the new one names it
in `supersedes`, the old one gets `invalid_at` and `superseded_by`, nothing is
deleted. Other holders' chains are never touched.

A keyless record has no chain to look up: it replaces only the version it
names in `supersedes`, and writers naming the same version share a lock on its
id.

Everything here is pure: the writer fetches the current versions under a chain
lock, this module decides what to change, the writer applies it. Records are
stored new-first, so a process that dies half-way leaves a stored record naming
its predecessor while the predecessor still looks current. That link is the
evidence: `plan` closes such a predecessor with the successor that names it
whenever it is given both (the writer fetches successors only where
`possibly_left_open` says a write may have been cut short; `whose repair` does
it for a whole tenant), and only then closes by time whatever a chain still has
open twice (a fork from writers that did not share locks).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from sidecar.store import Scope

Payload = dict[str, Any]


# How far a version without a valid_at of its own may move forward to follow its
# predecessor (clocks of replicas disagree a little); beyond it, refuse.
CLOCK_SKEW = timedelta(seconds=5)


@dataclass(frozen=True)
class Chain:
    """One holder's successive views of one proposition.

    A world-state claim has no observer: its holder is the writer that asserted
    it (a change-record system), so nobody else's write can replace it.
    """

    tenant: str
    observer: str | None
    observed: str | None
    key: str
    writer: str | None = None

    def lock_key(self) -> str:
        parts = (self.tenant, self.observer, self.observed, self.key, self.writer)
        return "\x00".join(part or "" for part in parts)

    def open_versions(self) -> Scope:
        absent = ["invalid_at"]
        if self.observer is None:
            absent.append("observer_id")
        if self.observed is None:
            absent.append("observed_id")
        return Scope(
            tenant=self.tenant,
            about=self.key,
            observer=self.observer,
            observed=self.observed,
            writer=self.writer,
            absent=tuple(absent),
        )


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
    writer = None if observer else (record.get("provenance") or {}).get("writer")
    return Chain(record["tenant"], observer, record.get("observed_id"), key, writer)


def _same_holder(previous: Payload, record: Payload) -> bool:
    if previous.get("observer_id") != record.get("observer_id"):
        return False
    if previous.get("observed_id") != record.get("observed_id"):
        return False
    if record.get("observer_id") is None:
        return bool(_writer(previous)) and _writer(previous) == _writer(record)
    return True


def _writer(record: Payload) -> str | None:
    writer = (record.get("provenance") or {}).get("writer")
    return str(writer) if writer else None


@dataclass
class Plan:
    # (record id, fields to set) on records already stored, applied after the new ones.
    updates: list[tuple[str, Payload]] = field(default_factory=list)
    # (batch index, reason) for records that cannot be written as asked.
    problems: list[tuple[int, str]] = field(default_factory=list)


def plan(
    new: list[Payload],
    open_versions: dict[Chain, list[Payload]],
    named: dict[str, Payload],
    undated: frozenset[str] | set[str] = frozenset(),
    successors: Sequence[Payload] = (),
) -> Plan:
    """Link each new record into its chain; mutates the new payloads in place.

    `open_versions` holds the stored versions without invalid_at of every chain
    the batch touches; `named` holds stored records that keyless new records
    name in `supersedes`; `undated` holds ids of new records whose valid_at was
    not given, which may move forward to their predecessor's (clock skew
    between replicas) rather than be refused; `successors` holds stored records
    whose `supersedes` names one of the stored records above (at least those
    `possibly_left_open` lists). With no new records, the plan is a repair.
    """
    result = Plan()
    stored = [r for versions in open_versions.values() for r in versions] + list(named.values())
    _close_cut_short(stored, successors, result)
    heads = {chain: _repair(versions, result) for chain, versions in open_versions.items()}
    in_batch = {record["id"] for record in new}
    claimed: set[str] = set()
    for index, record in enumerate(new):
        chain = chain_of(record)
        if chain is None:
            previous = named.get(str(record.get("supersedes")))
            reason = _explicit_refusal(record, previous, claimed)
        else:
            previous = heads.get(chain)
            reason = _chain_refusal(record, previous)
            if reason is None:
                heads[chain] = record
        if (
            reason == "valid_at_before_current_version"
            and record["id"] in undated
            and previous is not None
            and _at(previous, "valid_at") - _at(record, "valid_at") <= CLOCK_SKEW
        ):
            record["valid_at"] = previous["valid_at"]
            reason = None
            if chain is not None:
                heads[chain] = record
        if (
            reason is None
            and "invalid_at" in record
            and _at(record, "invalid_at") < _at(record, "valid_at")
        ):
            # A start chosen at commit time (or moved to follow the predecessor)
            # can pass the end the caller gave.
            reason = "invalid_at_before_valid_at"
        if reason is not None:
            result.problems.append((index, reason))
        elif previous is not None:
            claimed.add(previous["id"])
            record["supersedes"] = previous["id"]
            _close(previous, record, result, stored=previous["id"] not in in_batch)
    return result


def _chain_refusal(record: Payload, head: Payload | None) -> str | None:
    """A keyed record replaces its chain's head; an explicit `supersedes` must name it."""
    wanted = record.get("supersedes")
    if wanted is not None and (head is None or str(wanted) != head["id"]):
        # One reason for missing, someone else's and already replaced: the writer
        # learns nothing about records it could not see.
        return "cannot_supersede"
    if head is not None and _at(head, "valid_at") > _at(record, "valid_at"):
        return "valid_at_before_current_version"
    return None


def _explicit_refusal(record: Payload, previous: Payload | None, claimed: set[str]) -> str | None:
    """A keyless record replaces only what it names: the same holder's open, keyless version."""
    if record.get("supersedes") is None:
        return None
    if (
        previous is None
        or previous["id"] in claimed  # a second successor would fork the chain
        or "invalid_at" in previous
        or (previous.get("proposition") or {}).get("key")  # keyed versions live in their chain
        or not _same_holder(previous, record)
    ):
        return "cannot_supersede"
    if _at(previous, "valid_at") > _at(record, "valid_at"):
        return "valid_at_before_current_version"
    return None


def possibly_left_open(
    open_versions: dict[Chain, list[Payload]], named: dict[str, Payload]
) -> list[str]:
    """Ids of stored records a write cut short may have left open behind a successor.

    A cut-short keyed write always leaves its chain with two open versions (the
    old head and the batch's last), so a chain with one needs no look; a keyless
    version shows nothing, so every open one a new record names is looked at.
    The common write (one open version, nothing named) needs no lookup.
    """
    suspects = [
        r["id"] for versions in open_versions.values() if len(versions) > 1 for r in versions
    ]
    suspects += [r["id"] for r in named.values() if "invalid_at" not in r and chain_of(r) is None]
    return suspects


def _close_cut_short(stored: list[Payload], successors: Sequence[Payload], result: Plan) -> None:
    """Close each open stored record that a stored successor names: its write was cut short."""
    named_by: dict[str, list[Payload]] = defaultdict(list)
    for successor in successors:
        named_by[str(successor.get("supersedes"))].append(successor)
    for record in stored:
        if "invalid_at" in record:
            continue
        follows = _earliest(s for s in named_by[record["id"]] if _continues(record, s))
        if follows is not None:
            _close(record, follows, result, stored=True)


def _continues(previous: Payload, successor: Payload) -> bool:
    """Only a link the writer could have made is trusted: same line, not earlier."""
    chain = chain_of(previous)
    if chain_of(successor) != chain or (chain is None and not _same_holder(previous, successor)):
        return False
    return successor["id"] != previous["id"] and _at(successor, "valid_at") >= _at(
        previous, "valid_at"
    )


def _earliest(candidates: Iterable[Payload]) -> Payload | None:
    # Two successors of one version is a fork made before writers checked for
    # one; the first continues the line.
    return min(candidates, key=_stored_order, default=None)


def _stored_order(record: Payload) -> tuple[datetime, str, str]:
    return _at(record, "valid_at"), record.get("recorded_at", ""), record["id"]


def _repair(versions: list[Payload], result: Plan) -> Payload | None:
    """Close all but the latest of a chain's still open versions; returns the head."""
    still_open = [r for r in versions if "invalid_at" not in r]
    open_ids = {r["id"] for r in still_open}

    def age(r: Payload) -> tuple[datetime, str, bool]:
        # On a tie in time, a version that names another open one is the newer.
        return _at(r, "valid_at"), r.get("recorded_at", ""), r.get("supersedes") in open_ids

    ordered = sorted(still_open, key=age)
    for older, newer in pairwise(ordered):
        # Link first: a repair cut short then leaves the evidence the next one reads.
        if newer.get("supersedes") != older["id"]:
            newer["supersedes"] = older["id"]
            result.updates.append((newer["id"], {"supersedes": older["id"]}))
        _close(older, newer, result, stored=True)
    return ordered[-1] if ordered else None


def _close(previous: Payload, successor: Payload, result: Plan, stored: bool) -> None:
    fields = {"invalid_at": successor["valid_at"], "superseded_by": successor["id"]}
    if stored:
        result.updates.append((previous["id"], fields))
    previous.update(fields)


def _at(record: Payload, name: str) -> datetime:
    return datetime.fromisoformat(record[name])


def open_chains(records: list[Payload]) -> dict[Chain, list[Payload]]:
    """Group open versions by chain (for `whose repair`)."""
    chains: dict[Chain, list[Payload]] = defaultdict(list)
    for record in records:
        chain = chain_of(record)
        if chain is not None:
            chains[chain].append(record)
    return chains
