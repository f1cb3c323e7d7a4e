"""Nested views derived at read time from the records that imply them. Pure.

Two kinds of record say more than their holder's own view (docs/design.md §3):

- a witness's perception of an event (`writes/witnessed.py`: modality `observed`,
  provenance `witnessed`), naming who the witness saw there (`source.participants`),
  and, for a witness nobody saw, that they were unnoticed (`source.unnoticed`).
  Among those the witness saw, the event was public: the witness thinks each of
  them saw it, and saw the others see it, to any depth. So the record implies the
  view (holder; a1, …, ak) for any chain of people it names, each a participant
  the others saw (never the unnoticed holder themselves: nobody saw them see it),
  no one twice in a row: "anne saw that sally believes that anne believes p".
- a statement (`act: said`, writes/observations.py), public among the speaker and
  its hearers (`source.participants`): each hearer heard it (act `heard`), and
  thinks the speaker believes it; and, the statement being public among them, any
  of them thinks the others heard it, to any depth: (h; q1, …, qm, speaker, …)
  where … is what the speaker's claim was about.

A derived view is a record of its own for the policy: it carries its base record's
tenant, audience, scope and times, so it is seen by exactly whoever may see the
base, and the disclosure policy decides it like any record (a view of a mind is a
nested belief, never that mind's belief or knowledge). It has an id of its own
(derived from the base's, the holder and the chain) and names its base in
`provenance.derived_from`; it is never stored, so N witnesses cost N records, not
N^k. Which of a line's views is current is answers/current.py's to say.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise, product
from typing import Any

from sidecar.record import Stored, observed_path

# provenance.method of a derived view (a witnessed perception's is "witnessed").
DERIVED = "derived"
WITNESSED = "witnessed"
_IDS = uuid.UUID("a7f0c3e2-1d54-4b8e-9c6a-2e5f7d8b9a01")


@dataclass(frozen=True)
class Line:
    """One mind's line of views of one proposition: whose view, of which chain of
    minds, about which key; what someone heard someone say is a line of its own."""

    holder: str
    path: tuple[str, ...]
    key: str
    heard: bool = False


def witnessed(base: Stored) -> bool:
    """A witness's own perception of an event (the base of nested views)."""
    payload = base.payload
    return (
        payload.get("modality") == "observed"
        and (payload.get("provenance") or {}).get("method") == WITNESSED
        and not payload.get("observed_id")
        and bool(payload.get("observer_id"))
    )


def statement(base: Stored) -> bool:
    """A speaker's statement to the people present (the base of what they heard)."""
    payload = base.payload
    return payload.get("act") == "said" and bool(payload.get("observer_id"))


def view(base: Stored, holder: str, path: Sequence[str], heard: bool = False) -> Stored | None:
    """The view (holder; path) the base implies, or None if it implies no such view."""
    path = tuple(path)
    if not path:
        return None
    if witnessed(base):
        if heard or holder != base.payload["observer_id"] or not _chain(holder, path, _seen(base)):
            return None
        return _derived(base, holder, path, None, "observed")
    if statement(base):
        speaker = str(base.payload["observer_id"])
        claim = base.path
        split = len(path) - 1 - len(claim)
        if split < 0 or path[split] != speaker or path[split + 1 :] != claim:
            return None
        if heard and speaker in path[:split]:
            # What someone heard S say is read from where S first appears in the chain
            # (wording.py): "a thinks s thinks b heard s say p" is no line of its own.
            return None
        present = _present(base)
        if holder not in present or not _chain(holder, path[: split + 1], present):
            return None
        return _derived(base, holder, path, "heard" if heard else None, "believed")
    return None


def views(base: Stored, depth: int) -> Iterator[tuple[str, tuple[str, ...], bool]]:
    """Every (holder, path, heard) the base implies, to `depth` minds after the holder:
    the shallow first, then in the order of the names."""
    if witnessed(base):
        holder = str(base.payload["observer_id"])
        people = sorted(_seen(base))
        for size in range(1, depth + 1):
            for path in _chains(holder, people, size):
                yield holder, path, False
    elif statement(base):
        speaker = str(base.payload["observer_id"])
        claim = base.path
        present = sorted(_present(base))
        for size in range(1, depth - len(claim) + 1):
            for holder in present:
                for told in _chains(holder, present, size):
                    if told[-1] == speaker:
                        if speaker not in told[:-1]:
                            # (h; q1, …, qm) heard the speaker say it: h heard it itself
                            # (m = 0), or thinks qm did.
                            yield holder, (*told, *claim), True
                        yield holder, (*told, *claim), False


def heard_views(base: Stored, holder: str, hearers: Sequence[str], depth: int) -> Stored | None:
    """What `holder` thinks the chain `hearers` heard the base's speaker say (with no
    hearers: what the holder heard), whoever the speaker: recall's `heard`. None if the
    base is no statement that implies it, or the view would be deeper than `depth`."""
    if not statement(base):
        return None
    path = (*hearers, str(base.payload["observer_id"]), *base.path)
    return view(base, holder, path, heard=True) if len(path) <= depth else None


def heard_chain(payload: dict[str, Any]) -> tuple[str, ...]:
    """Who, in a view of what was heard, heard the speaker: the minds of its chain
    before the speaker (none: the holder heard it)."""
    path = observed_path(payload)
    return path[: speaker_at(payload)]


def speaker_at(payload: dict[str, Any]) -> int:
    """Where the speaker is in a heard view's chain: where the statement's speaker
    first appears (a chain of hearers never names them), else first."""
    path = observed_path(payload)
    speaker = (payload.get("source") or {}).get("speaker")
    return path.index(speaker) if speaker in path else 0


def latest_views(bases: Iterable[Stored], depth: int, budget: int) -> tuple[list[Stored], bool]:
    """Every view the bases imply to `depth`, each line's from its latest base, at most
    `budget` of them (shallow ones first); and whether the budget cut it short.

    Two bases of one valid time that imply one line: the one with the lower id."""
    chosen: dict[Line, Stored] = {}
    looked = 0
    for base in sorted(bases, key=lambda b: (-b.valid_at.timestamp(), b.id)):
        key = base.key
        if key is None:
            continue
        for holder, path, heard in views(base, depth):
            looked += 1
            line = Line(holder, path, key, heard)
            if line not in chosen:
                if len(chosen) >= budget:
                    return list(chosen.values()), True
                derived = view(base, holder, path, heard)
                if derived is not None:
                    chosen[line] = derived
            if looked >= 10 * budget:
                return list(chosen.values()), True
    return list(chosen.values()), False


def latest_per_line(views: Sequence[Stored]) -> list[Stored]:
    """Of derived views, each line's from its latest base (the lower base id on a tie),
    as `latest_views` chooses them."""
    chosen: dict[Line, Stored] = {}
    for derived in sorted(views, key=lambda v: (-v.valid_at.timestamp(), _base(v))):
        line = line_of(derived.payload)
        if line is not None:
            chosen.setdefault(line, derived)
    kept = {v.id for v in chosen.values()}
    return [v for v in views if v.id in kept]


def _base(derived: Stored) -> str:
    return str(((derived.payload.get("provenance") or {}).get("derived_from") or [""])[0])


def line_of(payload: dict[str, Any]) -> Line | None:
    """The line a record (stored or derived) is a version of; None for a record with
    no holder or no key (world state, keyless notes: nobody's line)."""
    holder = payload.get("observer_id")
    key = (payload.get("proposition") or {}).get("key")
    if not holder or not key:
        return None
    return Line(str(holder), observed_path(payload), str(key), payload.get("act") == "heard")


def _derived(
    base: Stored, holder: str, path: tuple[str, ...], act: str | None, modality: str
) -> Stored:
    source = base.payload
    text = (source.get("proposition") or {}).get("text", "")
    label = "\x00".join([base.id, holder, *path, act or ""])
    payload: dict[str, Any] = {
        "id": str(uuid.uuid5(_IDS, label)),
        "content": _as_written(holder, path, act, text, witnessed(base), base.payload),
        "observer_id": holder,
        "observed_id": path[0],
        "modality": modality,
        "provenance": {
            "writer": (source.get("provenance") or {}).get("writer"),
            "method": DERIVED,
            "derived_from": [base.id],
        },
    }
    if len(path) > 1:
        payload["observed_path"] = list(path)
    attitude = source.get("observed_attitude") if base.path else None
    if act is None or base.path:
        payload["observed_attitude"] = attitude or "believes"
    if act is not None:
        payload["act"] = act
    for name in (
        "tenant",
        "proposition",
        "source_id",
        "source",
        "evidence",
        "confidence",
        "audience",
        "access_scope",
        "valid_at",
        "recorded_at",
    ):
        if name in source:
            payload[name] = source[name]
    if payload["provenance"]["writer"] is None:
        del payload["provenance"]["writer"]
    if act == "heard" and "source" in payload:
        # Who was heard is the statement's holder: wording finds them in the chain by it.
        payload["source"] = {**payload["source"], "speaker": source["observer_id"]}
    return Stored(payload, payload["id"], base.valid_at, score=base.score)


def _as_written(
    holder: str,
    path: tuple[str, ...],
    act: str | None,
    text: str,
    perceived: bool,
    base: dict[str, Any],
) -> str:
    if perceived:
        return f"{holder} saw {' see '.join(path)} see that {text}"
    if act == "heard":
        at = path.index(str(base.get("observer_id")))
        hearer = " thinks that ".join((holder, *path[:at]))
        return f"{hearer} heard {path[at]} say that {text}"
    return f"{holder} thinks that {' thinks that '.join(path)} believes that {text}"


def _seen(base: Stored) -> list[str]:
    """Who the witness saw there, and who saw them: the participants but the unnoticed."""
    source = base.payload.get("source") or {}
    unnoticed = set(source.get("unnoticed") or ())
    return [p for p in source.get("participants") or () if p not in unnoticed]


def _present(base: Stored) -> list[str]:
    source = base.payload.get("source") or {}
    return list(source.get("participants") or ())


def _chain(holder: str, path: Sequence[str], people: Sequence[str]) -> bool:
    """Every mind of the path is among `people`, and none follows itself."""
    allowed = set(people)
    return all(p in allowed for p in path) and _no_repeats((holder, *path))


def _chains(holder: str, people: Sequence[str], size: int) -> Iterator[tuple[str, ...]]:
    """Chains of `size` of `people`, none following itself (after the holder), in name order."""
    for path in product(people, repeat=size):
        if _no_repeats((holder, *path)):
            yield path


def _no_repeats(minds: Sequence[str]) -> bool:
    # "anne thinks anne thinks p" is anne's own view: no line of its own.
    return all(a != b for a, b in pairwise(minds))
