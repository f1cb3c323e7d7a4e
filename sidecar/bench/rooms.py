"""Generated multi-party conversations with people joining and leaving: the data of the
membership benchmark (bench/rooms.py) and of the test that an extractor posting only
membership events gets the answers of one listing every turn's participants.

A room opens with a few people; then, step by step, someone present says something
(a raw turn, in their own words: no key), someone present leaves (never the last
two), or someone absent joins (a newcomer, or someone back). Who heard each turn is
known by construction (who was in the room when it was said, but the speaker), so
the questions' answers need no model of the sidecar: who heard which turns, and what
each person thinks each other person heard (the turns both heard, or that one said
and the other heard). A turn has a topic key and a value too, for an extractor that
keys its claims. Seeded: the same seed makes the same room.

Each room is posted four ways: keyed or unkeyed claims, participants listed per turn
or membership events only (`posts`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sidecar.record import iso

PEOPLE = ["ana", "ben", "cai", "dee", "eli", "fay", "gus", "hal"]
THINGS = ["keys", "cake", "phone", "map", "ball", "book"]
PLACES = ["drawer", "oven", "garden", "attic", "car", "shelf", "basket"]
START = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Change:
    person: str
    change: Literal["join", "leave"]
    at: datetime


@dataclass(frozen=True)
class Turn:
    utterance_id: str
    speaker: str
    text: str
    key: str
    value: str
    at: datetime
    hearers: frozenset[str]  # who was in the room, but the speaker


@dataclass(frozen=True)
class Room:
    source_id: str
    opened_with: tuple[str, ...]
    steps: tuple[Change | Turn, ...]

    @property
    def turns(self) -> list[Turn]:
        return [s for s in self.steps if isinstance(s, Turn)]

    @property
    def people(self) -> list[str]:
        everyone = set(self.opened_with) | {s.person for s in self.steps if isinstance(s, Change)}
        return sorted(everyone)

    def heard(self, person: str) -> set[str]:
        """The utterance ids `person` heard someone say."""
        return {t.utterance_id for t in self.turns if person in t.hearers}

    def thinks_heard(self, holder: str, hearer: str) -> set[str]:
        """The utterances `holder` knows `hearer` heard: said where both were, by anyone
        but the hearer (the holder may have said it)."""
        return {
            t.utterance_id
            for t in self.turns
            if hearer in t.hearers and (holder in t.hearers or holder == t.speaker)
        }


def generate(seed: int, source_id: str, people: int = 5, steps: int = 24) -> Room:
    rng = random.Random(seed)
    cast = PEOPLE[:people]
    inside = set(rng.sample(cast, k=max(2, people - 1)))
    opened = tuple(sorted(inside))
    at = START
    made: list[Change | Turn] = []
    for n in range(steps):
        at += timedelta(minutes=1)
        roll = rng.random()
        outside = sorted(set(cast) - inside)
        if roll < 0.15 and len(inside) > 2:
            person = rng.choice(sorted(inside))
            inside.discard(person)
            made.append(Change(person, "leave", at))
        elif roll < 0.3 and outside:
            person = rng.choice(outside)
            inside.add(person)
            made.append(Change(person, "join", at))
        else:
            speaker = rng.choice(sorted(inside))
            thing, place = rng.choice(THINGS), rng.choice(PLACES)
            made.append(
                Turn(
                    utterance_id=f"t{n}",
                    speaker=speaker,
                    text=f"the {thing} is in the {place}, turn {n}",
                    key=f"{thing}.location",
                    value=place,
                    at=at,
                    hearers=frozenset(inside - {speaker}),
                )
            )
    return Room(source_id, opened, tuple(made))


Keys = Literal["keyed", "unkeyed"]
Presence = Literal["participants", "membership"]


def posts(room: Room, keys: Keys, presence: Presence) -> list[tuple[str, dict[str, Any]]]:
    """The requests an extractor makes, in order: (path, body). With membership, the
    room is opened and every join and leave posted, and turns name no participants;
    with participants, each turn lists who heard it and no membership is posted."""
    made: list[tuple[str, dict[str, Any]]] = []
    if presence == "membership":
        opening = {"source_id": room.source_id, "members": list(room.opened_with), "at": iso(START)}
        made.append(("/v1/conversations", opening))
    for step in room.steps:
        if isinstance(step, Change):
            if presence == "membership":
                change = {"person": step.person, "change": step.change, "at": iso(step.at)}
                made.append(
                    (f"/v1/conversations/{room.source_id}/membership", {"changes": [change]})
                )
            continue
        proposition: dict[str, Any] = {"text": step.text}
        if keys == "keyed":
            proposition |= {"key": f"{room.source_id}.{step.key}", "value": step.value}
        body: dict[str, Any] = {
            "speaker": step.speaker,
            "source_id": room.source_id,
            "utterance_id": step.utterance_id,
            "said_at": iso(step.at),
            "claims": [{"proposition": proposition, "quoted": True}],
        }
        if presence == "participants":
            body["participants"] = sorted(step.hearers)
        made.append(("/v1/observations", body))
    return made
