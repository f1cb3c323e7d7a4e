"""Who heard what in multi-party conversations: leaks and accuracy, for an extractor that
keys its claims or not, and lists each turn's participants or posts membership only.

    .venv/bin/python bench/rooms.py [--rooms 6] [--people 5] [--steps 24]

Rooms are generated (sidecar/bench/rooms.py, seeds 0 … rooms-1): a few people in a
room, then turns in the speaker's own words, leaves and joins; who heard each turn is
known by construction. This checkout is served by `whose serve --dev` on embedded
defaults (bench/minds.py's `Served`), and each room is posted four ways, each in a
tenant of its own: keyed (a topic key per claim, `<room>.<thing>.location`) or unkeyed
(no key: each turn its own line), with participants listed per turn or with membership
events only. Then every person is asked what they heard from anyone (`heard: true`)
and, of every other person, what they think that person heard (`observed: [b], heard:
true`), each one request.

- leaks: a turn shown to someone who neither heard nor said it (in either question);
- who heard (first order): over every (person, turn), whether the person's answer
  lists the turn exactly when they heard it;
- second order: over every (a, b, turn), whether a's answer about b lists the turn
  exactly when a knows b heard it (both were there, or a said it to b).

A keyed extractor's turns on one topic by one speaker are one line, so each answer
holds its latest turn only: what that costs is the keyed row. Writes bench/results/rooms.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.minds import Served  # noqa: E402
from sidecar.bench import rooms  # noqa: E402

OUT = REPO / "bench" / "results"
VARIANTS: list[tuple[rooms.Keys, rooms.Presence]] = [
    ("keyed", "participants"),
    ("keyed", "membership"),
    ("unkeyed", "participants"),
    ("unkeyed", "membership"),
]


def turns_in(answer: dict[str, Any]) -> set[str]:
    return {"t" + i["content"].split(", turn ")[1].split("”")[0] for i in answer["items"]}


def measure(
    served: Served, room: rooms.Room, keys: rooms.Keys, presence: rooms.Presence
) -> Counter[str]:
    tenant = f"{keys}-{presence}-{room.source_id}"
    writer = {
        "X-Whose-Tenant": tenant,
        "X-Whose-Asker": "extractor-bot",
        "X-Whose-Roles": "extractor",
    }
    for path, body in rooms.posts(room, keys, presence):
        response = served.http.post(path, json=body, headers=writer)
        response.raise_for_status()
    counts: Counter[str] = Counter()
    turns = [t.utterance_id for t in room.turns]
    said = {t.utterance_id: t.speaker for t in room.turns}

    def ask(who: str, **body: Any) -> set[str]:
        request = {"query": "what was said?", "observer": who, "heard": True, "limit": 100} | body
        headers = {"X-Whose-Tenant": tenant, "X-Whose-Asker": who}
        response = served.http.post("/v1/recall", json=request, headers=headers)
        response.raise_for_status()
        counts["requests"] += 1
        return turns_in(response.json())

    for person in room.people:
        known = room.heard(person) | {t for t, s in said.items() if s == person}
        got = ask(person)
        counts["leaks"] += len(got - known)
        truth = room.heard(person)
        counts["first_pairs"] += len(turns)
        counts["first_right"] += sum((t in got) == (t in truth) for t in turns)
        for other in room.people:
            if other == person:
                continue
            got = ask(person, observed=other)
            counts["leaks"] += len(got - known)
            truth = room.thinks_heard(person, other)
            counts["second_pairs"] += len(turns)
            counts["second_right"] += sum((t in got) == (t in truth) for t in turns)
    counts["turns"] += len(turns)
    counts["changes"] += len(room.steps) - len(turns)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rooms", type=int, default=6)
    parser.add_argument("--people", type=int, default=5)
    parser.add_argument("--steps", type=int, default=24)
    args = parser.parse_args()
    generated = [
        rooms.generate(seed, f"room-{seed}", args.people, args.steps) for seed in range(args.rooms)
    ]
    results: dict[str, Any] = {"rooms": args.rooms, "people": args.people, "steps": args.steps}
    with tempfile.TemporaryDirectory() as scratch:
        served = Served("worktree", REPO, Path(scratch) / "data")
        try:
            for keys, presence in VARIANTS:
                total: Counter[str] = Counter()
                for room in generated:
                    total += measure(served, room, keys, presence)
                row = {
                    "turns": total["turns"],
                    "membership_changes": total["changes"],
                    "requests": total["requests"],
                    "leaks": total["leaks"],
                    "who_heard_accuracy": round(total["first_right"] / total["first_pairs"], 4),
                    "second_order_accuracy": round(
                        total["second_right"] / total["second_pairs"], 4
                    ),
                }
                results[f"{keys}+{presence}"] = row
                print(f"{keys:8} {presence:12} {json.dumps(row)}", flush=True)
        finally:
            served.close()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "rooms.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
