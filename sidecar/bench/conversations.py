"""Long two-person conversations with questions about them: the retrieval benchmark's data.

The shape of LoCoMo (Maharana et al., 2024): two people chat in dated sessions over
months; each question about what one of them said names the turns that hold the
evidence. `load_locomo` reads LoCoMo's own JSON (`locomo10.json`) when you have it;
`generate` makes conversations of the same shape from a bank of life events, so the
benchmark runs anywhere (no download):

- each speaker lives through events (adopting a dog, a pottery class, a new job...),
  each told in one first-person turn worded one of several ways, on a session's date;
- the other speaker lives through events of the same kinds, told in other words, so
  the speaker's name (and what is indexed of it) is what tells them apart;
- questions ask about one speaker's event in the third person, most of them in other
  words than the turn's ("What pet did Caroline get?" for "we brought home a rescue
  puppy"), some with the turn's own words;
- small talk fills the sessions with the words every conversation shares.

A turn is posted as an extractor would: an observation by its speaker, heard by both,
the speaker's own words (`quoted`), said at its session's time.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sidecar.record import iso

NAMES = [
    "caroline", "melanie", "jon", "gina", "john", "maria", "joanna", "nate", "tim", "audrey",
    "andrew", "deborah", "evan", "sam", "calvin", "dave", "jolene", "james", "nina", "oscar",
]  # fmt: skip


@dataclass(frozen=True)
class Event:
    """One kind of thing that happens to someone: how they tell it, how one asks."""

    kind: str
    tellings: tuple[str, ...]  # first person, with {x} for the event's own detail
    details: tuple[str, ...]
    questions: tuple[str, ...]  # third person, {name}; paraphrases first, echoes last


EVENTS = [
    Event(
        "pet",
        (
            "We finally brought home a rescue {x} last weekend, the kids are thrilled!",
            "Guess what, I adopted a {x} from the shelter.",
        ),
        ("puppy", "kitten", "beagle", "tabby cat"),
        (
            "What animal did {name} adopt?",
            "What pet did {name} get?",
            "Which animal joined {name}'s family?",
        ),
    ),
    Event(
        "class",
        (
            "I signed up for a {x} class downtown, first session was messy but fun.",
            "Started taking {x} lessons on Tuesday evenings.",
        ),
        ("pottery", "salsa dancing", "watercolor", "guitar"),
        (
            "What hobby did {name} start learning?",
            "Which course did {name} enroll in?",
            "What lessons is {name} taking?",
        ),
    ),
    Event(
        "job",
        (
            "I accepted an offer as a {x}, I start next month.",
            "Big news: they hired me to work as a {x}.",
        ),
        ("nurse", "software engineer", "school counselor", "graphic designer"),
        (
            "What new position did {name} take?",
            "What is {name}'s new occupation?",
            "What job offer did {name} accept?",
        ),
    ),
    Event(
        "trip",
        (
            "Just got back from a week in {x}, the food was incredible.",
            "We spent our vacation hiking around {x}.",
        ),
        ("Lisbon", "Kyoto", "the Rocky Mountains", "Iceland"),
        (
            "Where did {name} travel on holiday?",
            "Which place did {name} visit recently?",
            "Where did {name} go for vacation?",
        ),
    ),
    Event(
        "race",
        (
            "I ran a {x} to raise money for a mental health charity.",
            "Finished my first {x} this morning, legs are jelly.",
        ),
        ("5k", "half marathon", "charity marathon", "10k"),
        (
            "What athletic event did {name} take part in?",
            "What did {name} run?",
            "Which race did {name} finish?",
        ),
    ),
    Event(
        "book",
        (
            "I've been reading {x} every night, can't put it down.",
            "My book club picked {x} and I loved it.",
        ),
        ("Becoming", "Dune", "Little Women", "The Hobbit"),
        (
            "What novel has {name} been enjoying?",
            "Which book did {name} recommend?",
            "What is {name} reading?",
        ),
    ),
    Event(
        "support",
        (
            "I went to a {x} yesterday and it was so powerful.",
            "Joined a {x} that meets every Thursday, everyone is so kind.",
        ),
        ("LGBTQ support group", "grief support circle", "parents support group", "AA meeting"),
        (
            "What kind of gathering did {name} attend for support?",
            "Where does {name} find community and encouragement?",
            "What support group did {name} go to?",
        ),
    ),
    Event(
        "garden",
        (
            "Planted {x} in the backyard, fingers crossed they grow.",
            "Our garden is overflowing with {x} this summer.",
        ),
        ("tomatoes", "sunflowers", "strawberries", "herbs"),
        (
            "What is {name} growing at home?",
            "What did {name} plant?",
            "What is in {name}'s garden?",
        ),
    ),
    Event(
        "move",
        (
            "We're moving to {x} in the spring, packing already.",
            "Signed the lease for a place in {x}!",
        ),
        ("Seattle", "a small town near the coast", "Chicago", "my hometown"),
        (
            "Where is {name} relocating?",
            "Which city will {name} live in?",
            "Where is {name} moving?",
        ),
    ),
    Event(
        "family",
        (
            "My {x} came to visit and we cooked together all weekend.",
            "Spent the whole day with my {x}, we went to the beach.",
        ),
        ("grandmother", "sister", "cousins", "old college roommate"),
        (
            "Which relative or friend spent time with {name}?",
            "Who visited {name}?",
            "Who did {name} spend the weekend with?",
        ),
    ),
    Event(
        "art",
        (
            "I painted {x} with the kids, it's hanging in the hallway now.",
            "Finished a canvas of {x}, took me three weeks.",
        ),
        ("a sunset over the lake", "a field of horses", "a portrait of my dad", "the city skyline"),
        (
            "What artwork did {name} make?",
            "What did {name} create on canvas?",
            "What did {name} paint?",
        ),
    ),
    Event(
        "volunteer",
        (
            "I volunteer at {x} on Saturdays now.",
            "Spent the morning helping out at {x}.",
        ),
        ("the animal shelter", "a food bank", "the children's hospital", "a youth center"),
        (
            "Where does {name} donate their time?",
            "Where does {name} help out without pay?",
            "Where does {name} volunteer?",
        ),
    ),
    Event(
        "instrument",
        (
            "Bought a used {x} and I'm teaching myself songs.",
            "Practicing the {x} every evening before bed.",
        ),
        ("violin", "piano", "ukulele", "drum kit"),
        (
            "Which musical instrument does {name} play?",
            "What is {name} practicing musically?",
            "What instrument did {name} buy?",
        ),
    ),
    Event(
        "health",
        (
            "Doctor told me to cut back on {x}, so I'm trying.",
            "I've given up {x} for a month, feeling better already.",
        ),
        ("sugar", "caffeine", "red meat", "late-night snacks"),
        (
            "What is {name} avoiding for health reasons?",
            "What did {name} quit?",
            "What did {name} give up?",
        ),
    ),
    Event(
        "research",
        (
            "I've been researching {x}, it's a lot to take in.",
            "Spent hours reading about {x} last night.",
        ),
        ("adoption agencies", "solar panels", "graduate programs", "electric cars"),
        (
            "What has {name} been looking into?",
            "What is {name} investigating lately?",
            "What did {name} research?",
        ),
    ),
]

SMALL_TALK = [
    "How was your week?",
    "Busy as always, work has been a lot.",
    "That sounds amazing, I'm so happy for you!",
    "Haha, same here honestly.",
    "Thanks for asking, it means a lot.",
    "We should catch up in person soon.",
    "The weather has been so nice lately.",
    "I've been trying to get more sleep.",
    "The kids keep me on my toes.",
    "Let me know how it goes!",
    "That's wonderful news.",
    "I know what you mean, it can be tough.",
    "Talk soon, take care!",
    "Did you see the game last night?",
    "Nothing much, just relaxing at home.",
    "Oh wow, tell me more about it.",
]
REPLIES = [
    "No way, that's awesome! How did it go?",
    "Wow, good for you!",
    "That sounds like a lot of fun.",
    "I'm so proud of you.",
    "How exciting, tell me everything.",
]


@dataclass
class Turn:
    id: str  # e.g. D3:7, unique within its conversation
    speaker: str
    text: str
    at: datetime


@dataclass
class Question:
    text: str
    evidence: list[str]  # turn ids
    about: str  # the speaker the question is about


@dataclass
class Conversation:
    name: str
    speakers: tuple[str, str]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def generate(
    conversations: int = 10, sessions: int = 24, events: int = 12, seed: int = 27
) -> list[Conversation]:
    rng = random.Random(seed)
    made = []
    for c in range(conversations):
        a, b = rng.sample(NAMES, 2)
        conv = Conversation(f"conv-{c}", (a, b))
        # Each speaker lives through `events` kinds of event, in the other's words too.
        plan: list[tuple[str, Event, str, int]] = []
        for speaker in (a, b):
            for event in rng.sample(EVENTS, min(events, len(EVENTS))):
                detail = rng.choice(event.details)
                plan.append((speaker, event, detail, rng.randrange(len(event.tellings))))
        rng.shuffle(plan)
        per_session = [plan[i::sessions] for i in range(sessions)]
        start = datetime(2023, 1, 8, 13, 0, tzinfo=UTC) + timedelta(days=rng.randrange(90))
        for s, told in enumerate(per_session):
            at = start + timedelta(days=9 * s + rng.randrange(5), hours=rng.randrange(8))
            turns: list[tuple[str, str, tuple[str, Event] | None]] = []
            speakers = [a, b]
            for _ in range(rng.randrange(8, 20)):
                turns.append((speakers[len(turns) % 2], rng.choice(SMALL_TALK), None))
            for speaker, event, detail, telling in told:
                text = event.tellings[telling].format(x=detail)
                turns.append((speaker, text, (speaker, event)))
                other = b if speaker == a else a
                turns.append((other, rng.choice(REPLIES), None))
                turns.append((other, rng.choice(SMALL_TALK), None))
            for i, (speaker, text, told_event) in enumerate(turns):
                turn = Turn(f"D{s + 1}:{i + 1}", speaker, text, at + timedelta(minutes=i))
                conv.turns.append(turn)
                if told_event is not None:
                    who, event = told_event
                    for ask in rng.sample(event.questions, 2):
                        question = Question(ask.format(name=who.title()), [turn.id], who)
                        conv.questions.append(question)
        made.append(conv)
    return made


_LOCOMO_TIME = re.compile(r"(\d+):(\d+) (am|pm) on (\d+) (\w+),? (\d+)")


def load_locomo(path: Path) -> list[Conversation]:
    """LoCoMo's JSON: the questions with evidence (the adversarial category aside)."""
    made = []
    for n, sample in enumerate(json.loads(path.read_text())):
        talk = sample["conversation"]
        a, b = talk["speaker_a"].lower(), talk["speaker_b"].lower()
        conv = Conversation(f"locomo-{n}", (a, b))
        s = 1
        while f"session_{s}" in talk:
            at = _when(talk.get(f"session_{s}_date_time", ""))
            for i, turn in enumerate(talk[f"session_{s}"]):
                text = turn.get("text") or ""
                if turn.get("blip_caption"):
                    text = f"{text} [shares a photo of {turn['blip_caption']}]".strip()
                conv.turns.append(
                    Turn(turn["dia_id"], turn["speaker"].lower(), text, at + timedelta(minutes=i))
                )
            s += 1
        known = {t.id for t in conv.turns}
        for qa in sample["qa"]:
            evidence = [e.strip() for e in qa.get("evidence", []) if e.strip() in known]
            if qa.get("category") == 5 or not evidence:
                continue
            conv.questions.append(Question(qa["question"], evidence, ""))
        made.append(conv)
    return made


def _when(text: str) -> datetime:
    found = _LOCOMO_TIME.search(text)
    if not found:
        return datetime(2023, 1, 1, tzinfo=UTC)
    hour, minute, half, day, month, year = found.groups()
    clock = int(hour) % 12 + (12 if half == "pm" else 0)
    parsed = datetime.strptime(f"{day} {month} {year}", "%d %B %Y")
    return parsed.replace(hour=clock, minute=int(minute), tzinfo=UTC)


def observations(conv: Conversation) -> list[dict[str, Any]]:
    """Each turn as an extractor posts it: the speaker's words, heard by both."""
    return [
        {
            "speaker": turn.speaker,
            "source_id": f"{conv.name}/{turn.id}",
            "participants": list(conv.speakers),
            "said_at": iso(turn.at),
            "claims": [{"proposition": {"text": turn.text[:2000]}, "quoted": True}],
        }
        for turn in conv.turns
        if turn.text.strip()
    ]
