"""How a chain closes over the versions an erasure takes out of it, decided without I/O.

Erasing a version takes it out of its chain as if it had never been written
(docs/design.md §4, "Erasure"): the versions on either side are linked to each other
and the earlier one now ends where the later one starts; erasing a chain's current
version makes the version before it current again; erasing its first leaves the next
one first. A run of erased versions is closed over in one step. The eraser
(writes/eraser.py) reads the erased records and their neighbours under the chain
locks, asks `relink` what to change, and changes it before it deletes anything, so
that an erasure cut short leaves a coherent chain, with or without the version, and
running it again finishes it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from sidecar.record import Payload

# How far `relink` walks through erased versions to a surviving neighbour.
MAX_RUN = 100


@dataclass
class Relink:
    """What to change on surviving records: fields to set, fields to remove."""

    set: dict[str, Payload] = field(default_factory=dict)
    clear: dict[str, list[str]] = field(default_factory=dict)
    # Versions that are current again: the erased version was their successor.
    reopened: list[str] = field(default_factory=list)

    def _set(self, record_id: str, fields: Payload) -> None:
        self.set.setdefault(record_id, {}).update(fields)

    def _clear(self, record_id: str, names: list[str]) -> None:
        kept = self.clear.setdefault(record_id, [])
        kept += [n for n in names if n not in kept]


def neighbours(erased: Collection[str], stored: Mapping[str, Payload]) -> set[str]:
    """The ids `relink` still needs: links of the erased records (and of the erased
    records they reach) that `stored` does not hold yet."""
    wanted: set[str] = set()
    for record_id in erased:
        record = stored.get(record_id)
        if record is None:
            continue
        for link in ("supersedes", "superseded_by"):
            target = record.get(link)
            if target and str(target) not in stored:
                wanted.add(str(target))
    return wanted


def relink(erased: Collection[str], stored: Mapping[str, Payload]) -> Relink:
    """The changes that close every chain over its erased versions.

    `stored` holds the erased records and their neighbours as stored (a neighbour
    missing from it is taken to be gone). A surviving neighbour is changed only if
    its own link names the erased run: a link that names something else is not this
    erasure's to mend."""
    gone = set(erased)
    plan = Relink()
    for record_id in sorted(gone):
        record = stored.get(record_id)
        if record is None:
            continue
        before, first = _survivor(record, "supersedes", gone, stored)
        after, last = _survivor(record, "superseded_by", gone, stored)
        if before is not None and str(before.get("superseded_by")) == first:
            if after is not None:
                plan._set(
                    before["id"], {"superseded_by": after["id"], "invalid_at": after["valid_at"]}
                )
            else:
                plan._clear(before["id"], ["superseded_by", "invalid_at"])
                if before["id"] not in plan.reopened:
                    plan.reopened.append(before["id"])
        if after is not None and str(after.get("supersedes")) == last:
            if before is not None:
                plan._set(after["id"], {"supersedes": before["id"]})
            else:
                plan._clear(after["id"], ["supersedes"])
    return plan


def _survivor(
    record: Payload, link: str, gone: set[str], stored: Mapping[str, Payload]
) -> tuple[Payload | None, str]:
    """The nearest version along `link` that is not erased (None: none, or not
    stored), and the erased version next to it (whose id its own link should name)."""
    edge = str(record["id"])
    current = record
    for _ in range(MAX_RUN):
        target = current.get(link)
        if not target:
            return None, edge
        following = stored.get(str(target))
        if following is None:
            return None, edge
        if str(target) not in gone:
            return following, edge
        current, edge = following, str(target)
    return None, edge
