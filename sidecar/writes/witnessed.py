"""Witnessed events: what several people saw together becomes each one's own view.

An extractor that knows who was present when something happened (the marble moved,
a statement was announced) posts the event once. Each witness gets one record: their
belief of it (modality `observed`, with evidence of their witnessing), naming who
they saw there (`source.participants`) and, for a witness nobody saw (at the window),
that they were unnoticed (`source.unnoticed`). What each witness thinks the others
think, to any depth, is derived from that record at read time (answers/derived.py):
N records an event, not N + N(N-1) (nor N^k for depth k). A witnessed announcement
to a directory group also yields the announcer's common-knowledge record, which the
policy accepts only if every member of the group was there (docs/design.md §3). The
records then take the ordinary write path (write policy, supersession), all or none.

Audience (docs/design.md §4, a chain is seen whole by one audience): a witness's view
is told to that witness alone (and the event's `readers`), and so is everything
derived from it. A person's views of one key then form one chain whoever else was in
the room, so each later event they witness supersedes their earlier view; every
version of a chain is made at an event its whole audience witnessed, so nobody learns
from a chain's links, status or end of a move they did not see; and an unnoticed
witness is named in no record anyone else is told.

The body (WitnessedEvent) is in messages.py, with every other request body.
"""

from __future__ import annotations

from typing import Any

from sidecar.messages import Announcement, WitnessedEvent
from sidecar.record import Evidence, MemoryWrite

# The evidence kind and provenance method that say a record came from witnessing.
WITNESSED = "witnessed"


def to_records(event: WitnessedEvent) -> list[MemoryWrite]:
    """Each witness's view, then (for an announcement) the announcer's
    common-knowledge record."""
    witnesses = list(dict.fromkeys(event.witnessed_by))
    unnoticed = set(event.unnoticed)
    noticed = [w for w in witnesses if w not in unnoticed]

    def present(holder: str) -> list[str]:
        # Who was there as the holder knows it: an unnoticed witness is in nobody
        # else's record, not even as a participant.
        return [w for w in witnesses if w in noticed or w == holder]

    records = [_record(event, holder, present(holder), holder in unnoticed) for holder in witnesses]
    if event.announcement is not None:
        # Common knowledge is among those everyone saw hear it: an unnoticed member
        # heard it, but nobody knows they did (the policy then finds them absent).
        records.append(_announced(event, noticed, event.announcement))
    return records


def _record(event: WitnessedEvent, holder: str, present: list[str], unseen: bool) -> MemoryWrite:
    source = _source(event, present, "perception")
    if unseen:
        # The holder knows nobody saw them: no view of theirs has anyone see them.
        source["unnoticed"] = [holder]
    return MemoryWrite(
        content=f"{holder} saw that {event.proposition.text}",
        proposition=event.proposition,
        observer_id=holder,
        source_id=event.source_id,
        source=source,
        modality="observed",
        evidence=[_witnessing(event, holder)],
        confidence=event.confidence,
        audience=_audience([holder], event.readers),
        access_scope=event.access_scope,
        valid_at=event.at,
        provenance={"method": WITNESSED},
    )


def _announced(
    event: WitnessedEvent, witnesses: list[str], announcement: Announcement
) -> MemoryWrite:
    speaker, group = announcement.speaker, announcement.to
    return MemoryWrite(
        content=f"{speaker} announced to {group} that {event.proposition.text}, "
        f"before {', '.join(witnesses)}",
        proposition=event.proposition,
        observer_id=speaker,
        source_id=event.source_id,
        source=_source(event, witnesses, "announcement") | {"speaker": speaker},
        modality="common_knowledge",
        evidence=[_witnessing(event, who) for who in witnesses],
        confidence=event.confidence,
        audience=_audience([group], event.readers),
        access_scope=event.access_scope,
        valid_at=event.at,
        provenance={"method": WITNESSED},
    )


def _source(event: WitnessedEvent, present: list[str], kind: str) -> dict[str, Any]:
    source: dict[str, Any] = {"kind": kind, "participants": present}
    if event.channel is not None:
        source["channel"] = event.channel
    return source


def _witnessing(event: WitnessedEvent, who: str) -> Evidence:
    return Evidence(kind=WITNESSED, ref=event.source_id, by=who, at=event.at)


def _audience(first: list[str], readers: list[str]) -> list[str]:
    return list(dict.fromkeys([*first, *readers]))
