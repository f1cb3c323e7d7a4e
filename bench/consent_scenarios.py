"""Privacy and utility of grants on a generated scenario set (issue 39, docs/consent.md).

    .venv/bin/python bench/consent_scenarios.py [--households 12] [--seed 7]

How the scenarios are built (seeded, so a run is repeatable): `households` households
in one tenant, each with two data subjects and three relatives (the people who ask).
Each subject tells the assistant twelve things, two in each of six categories
(appointments, clinical, contact, finance, school, credentials), each a record of
their own (audience: the subject alone) with a sentence naming the subject and the
category's topic words. Each subject then grants one to three relatives one or two
categories: a third of the grants end a few seconds later ("until Friday"), a quarter
of the others are revoked later ("take my mother's access away"), the rest stay.

Every relative then asks, for each subject of their household and each category, one
recall naming the subject and the topic (limit 20), twice: while every grant is in
force (phase `in force`), and after the ends have passed and the revocations are made
(phase `after`), with no record rewritten in between. Against the scenario's own
ground truth (who may see what, computed here from the grants, never from the
sidecar's answers):

- privacy leaks: records a recall disclosed that the asker has no right to (no live
  grant by the record's subject of its category, not in its audience), as a count and
  as a share of all records disclosed;
- utility: of the records a live grant lets the asker see that the question targets
  (that subject, that category), the share the recall returned in its top 20.

Starts `whose serve --dev` (embedded defaults) on a throw-away data folder; prints the
figures and writes bench/results/consent_scenarios.json. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.factories import served  # noqa: E402

TENANT = "acme"
TOPICS = {
    "appointments": ["dentist appointment", "physio session"],
    "clinical": ["blood test result", "allergy"],
    "contact": ["new phone number", "home address"],
    "finance": ["bank account", "rent payment"],
    "school": ["school pickup", "parent evening"],
    "credentials": ["door code", "wifi password"],
}
DETAILS = ["on Monday at 9", "on Tuesday at 15:30", "7 Elm Road", "ends in 4471", "next week"]
RELATIONS = ["sister", "mother", "son"]
LIMIT = 20
# How long the grants that end last after they are given: they must be in force for the
# first phase (its recalls are made before), and the second starts once they ended.
ENDS_AFTER_S = 60.0


@dataclass
class Grant:
    subject: str
    reader: str
    categories: tuple[str, ...]
    ends: bool
    revoked: bool
    grant_id: str = ""


@dataclass
class Scenario:
    subjects: list[tuple[str, list[str]]] = field(default_factory=list)  # subject, readers
    records: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> subject, category
    grants: list[Grant] = field(default_factory=list)


def as_(who: str) -> dict[str, str]:
    return {"X-Whose-Asker": who, "X-Whose-Tenant": TENANT}


def build(households: int, rng: random.Random) -> tuple[Scenario, list[list[dict[str, Any]]]]:
    scenario = Scenario()
    writes = []
    for h in range(households):
        readers = [f"h{h}-{relation}" for relation in RELATIONS]
        for s in ("a", "b"):
            subject = f"h{h}-{s}"
            scenario.subjects.append((subject, readers))
            batch = []
            for category, topics in TOPICS.items():
                for topic in topics:
                    text = f"{subject}'s {topic} is {rng.choice(DETAILS)}"
                    batch.append(
                        {
                            "content": f"{subject} says {text}",
                            "proposition": {"text": text},
                            "observer_id": subject,
                            "source_id": f"{subject}-chat",
                            "source": {"kind": "conversation", "speaker": subject},
                            "modality": "reported_belief",
                            "audience": [subject],
                            "categories": [category],
                        }
                    )
            writes.append(batch)
            for reader in rng.sample(readers, rng.randint(1, 3)):
                categories = tuple(rng.sample(sorted(TOPICS), rng.randint(1, 2)))
                ends = rng.random() < 1 / 3
                revoked = not ends and rng.random() < 1 / 4
                scenario.grants.append(Grant(subject, reader, categories, ends, revoked))
    return scenario, writes


def allowed(scenario: Scenario, reader: str, record_id: str, phase: str) -> bool:
    subject, category = scenario.records[record_id]
    return reader == subject or any(
        g.subject == subject
        and g.reader == reader
        and category in g.categories
        and (phase == "in force" or not (g.ends or g.revoked))
        for g in scenario.grants
    )


def measure(http: httpx.Client, scenario: Scenario, phase: str) -> dict[str, Any]:
    disclosed = leaks = wanted = found = recalls = 0
    started = time.perf_counter()
    for subject, readers in scenario.subjects:
        for reader in readers:
            for category, topics in TOPICS.items():
                query = f"{subject}'s {topics[0]} or {topics[1]}"
                answer = http.post(
                    "/v1/recall", json={"query": query, "limit": LIMIT}, headers=as_(reader)
                )
                answer.raise_for_status()
                recalls += 1
                shown = {item["id"] for item in answer.json()["items"]}
                disclosed += len(shown)
                leaks += sum(not allowed(scenario, reader, i, phase) for i in shown)
                targets = {
                    i
                    for i, (owner, kind) in scenario.records.items()
                    if owner == subject and kind == category and allowed(scenario, reader, i, phase)
                }
                wanted += len(targets)
                found += len(targets & shown)
    return {
        "phase": phase,
        "recalls": recalls,
        "disclosed": disclosed,
        "leaks": leaks,
        "leak_rate": leaks / disclosed if disclosed else 0.0,
        "allowed_targets": wanted,
        "returned_targets": found,
        "utility": found / wanted if wanted else 0.0,
        "seconds": time.perf_counter() - started,
    }


def run(households: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    scenario, writes = build(households, rng)
    with (
        tempfile.TemporaryDirectory() as folder,
        served(Path(folder)) as base,
        httpx.Client(base_url=base, timeout=60) as http,
    ):
        for batch in writes:
            subject = batch[0]["observer_id"]
            stored = http.post("/v1/memories", json=batch, headers=as_(subject))
            stored.raise_for_status()
            for record, body in zip(stored.json()["records"], batch, strict=True):
                scenario.records[record["id"]] = (subject, body["categories"][0])
        ends = datetime.now(UTC) + timedelta(seconds=ENDS_AFTER_S)
        for g in scenario.grants:
            asked: dict[str, Any] = {"reader": g.reader, "categories": list(g.categories)}
            if g.ends:
                asked["until"] = ends.isoformat()
            given = http.post("/v1/grants", json=asked, headers=as_(g.subject))
            given.raise_for_status()
            g.grant_id = given.json()["grant_id"]
        before = measure(http, scenario, "in force")
        if datetime.now(UTC) >= ends:
            raise SystemExit("the first phase outlasted the grants' end: raise ENDS_AFTER_S")
        for g in scenario.grants:
            if g.revoked:
                http.delete(f"/v1/grants/{g.grant_id}", headers=as_(g.subject)).raise_for_status()
        time.sleep(max(0.0, (ends - datetime.now(UTC)).total_seconds()) + 0.5)
        after = measure(http, scenario, "after")
    return {
        "households": households,
        "seed": seed,
        "records": len(scenario.records),
        "grants": len(scenario.grants),
        "grants_ending": sum(g.ends for g in scenario.grants),
        "grants_revoked": sum(g.revoked for g in scenario.grants),
        "limit": LIMIT,
        "phases": [before, after],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--households", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    result = run(args.households, args.seed)
    print(
        f"{result['households']} households, {result['records']} records, "
        f"{result['grants']} grants ({result['grants_ending']} ending, "
        f"{result['grants_revoked']} revoked), top {LIMIT}"
    )
    for p in result["phases"]:
        print(
            f"{p['phase']:>9}: {p['recalls']} recalls, {p['disclosed']} records disclosed, "
            f"privacy leaks {p['leaks']} ({100 * p['leak_rate']:.1f} %), utility "
            f"{p['returned_targets']}/{p['allowed_targets']} ({100 * p['utility']:.1f} %), "
            f"{p['seconds']:.1f} s"
        )
    out = REPO / "bench" / "results" / "consent_scenarios.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
