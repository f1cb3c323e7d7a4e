"""Deletion leaks and collateral of forgetting (issue 39, docs/forgetting.md): a scenario
set of households and clinics played into a sidecar, three ways, in one run.

    .venv/bin/python bench/forgetting_scenarios.py [--episodes 40] [--seed 39]

How the set is built (seeded, so a run is repeatable): each episode is a tenant of its
own, a household (a person, their partner, a child minder) or a clinic (a patient, a
nurse, a receptionist), an extractor relaying what is said (role `extractor`, dev
headers) and an erasure officer (role `data_protection`). In it:
- the person tells the agent two secrets (a PIN, a door, alarm, locker or safe code: 4
  digits; or a phone number) in front of the second person, and the third notes one of
  them privately (a record the person cannot see or erase);
- the second and third note temporary numbers privately ("the temporary gate code is
  …"), which the person later asks to have deleted ("delete those temporary numbers");
- four keepers that must survive: facts with numbers and the word "temporary" that are
  not secrets ("the dentist moved to 3 pm", "the temporary parking permit is on the
  fridge"), one of them the person's, one shared, one private to each other person;
- then "never keep my PIN" for each secret, and after it restatements: by the person
  ("5532 is deleted"), by the second person privately ("amira's bank PIN is 5532"), a
  reworded paraphrase with the literal ("amira types 5532 for the bank PIN"), and a
  reformatted one ("55 32"), which no literal rule matches.

Three ways of carrying out the deletion requests, each on a sidecar of its own
(embedded defaults, OPA linked in), on the same episodes:
- `erasure only` (what whose offered before): the person erases, by id, the records a
  recall at top 20 for each secret finds that they may erase; nobody can find the
  temporary numbers they may not see; restatements are stored as written;
- `subject's rules`: the person sets a value rule per secret (`POST /v1/forget-rules`),
  and the officer erases "temporary number" by content (`kind: query`, min_score 0.4);
- `officer's rules`: the same, with the officer setting each rule for the person (an
  officer's rule erases now what the person may not see too).

Measured after every write: a deletion leak is a secret (or temporary number) asked to
be forgotten that a recall at top 20 by anyone of the episode (for each secret: its
label, its value, and "what was deleted?") still returns, in any form it was written in;
collateral is a keeper erased (404 to its holder) or masked. Leaks are also counted by
where they come from (before the request, or which restatement). This is a benchmark,
not a test: it prints a table and writes bench/results/forgetting_scenarios.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.factories import served  # noqa: E402

SETTINGS = {
    "household": ("amira", "ben", "cleo"),
    "clinic": ("pat", "nurse-kim", "desk-lou"),
}
SECRETS = [
    ("bank PIN", "pin"),
    ("front door code", "door.code"),
    ("alarm code", "alarm.code"),
    ("locker code", "locker.code"),
    ("safe code", "safe.code"),
    ("phone number", "phone"),
]
KEEPERS = [
    "the dentist moved to 3 pm on the 14th",
    "the temporary parking permit is on the fridge",
    "room 12 is free after 5",
    "the bus leaves at 7:15 from stop 40",
    "the boiler was serviced in 2024",
    "the prescription is for 20 mg twice a day",
]
MODES = ("erasure only", "subject's rules", "officer's rules")
MASK = "[forgotten]"


def value_for(key: str, rng: random.Random) -> str:
    if key == "phone":
        return f"555-{rng.randrange(100, 1000):03d}{rng.randrange(10)}"
    return f"{rng.randrange(1000, 10000)}"


def reformatted(value: str) -> str:
    digits = value.replace("-", "")
    return f"{digits[:2]} {digits[2:4]}" + (f" {digits[4:]}" if len(digits) > 4 else "")


@dataclass
class Secret:
    label: str
    key: str
    value: str
    # The forms it was written in, to look for in what recall returns.
    forms: list[str] = field(default_factory=list)


@dataclass
class Episode:
    tenant: str
    kind: str
    person: str
    second: str
    third: str
    secrets: list[Secret]
    temporary: list[str]
    keepers: list[tuple[str, str, list[str]]]  # (holder, text, audience)


def episodes(count: int, seed: int) -> list[Episode]:
    rng = random.Random(seed)
    made = []
    for n in range(count):
        kind = "household" if n % 2 == 0 else "clinic"
        person, second, third = SETTINGS[kind]
        chosen = rng.sample(SECRETS, 2)
        secrets = []
        for label, key in chosen:
            value = value_for(key, rng)
            secrets.append(Secret(label, key, value, [value, reformatted(value)]))
        temporary = [f"{rng.randrange(1000, 10000)}", f"{rng.randrange(1000, 10000)}"]
        texts = rng.sample(KEEPERS, 4)
        keepers = [
            (person, texts[0], [person]),
            (person, texts[1], [person, second]),
            (second, texts[2], [second]),
            (third, texts[3], [third]),
        ]
        made.append(
            Episode(f"fs{seed}-{n}", kind, person, second, third, secrets, temporary, keepers)
        )
    return made


class Played:
    """One episode on one sidecar, one way."""

    def __init__(self, http: httpx.Client, episode: Episode, mode: str) -> None:
        self.http = http
        self.e = episode
        self.mode = mode
        self.keeper_ids: list[tuple[str, str]] = []  # (holder, id)
        self.leak_sources: Counter[str] = Counter()

    def as_(self, who: str, roles: str = "") -> dict[str, str]:
        headers = {"X-Whose-Asker": who, "X-Whose-Tenant": self.e.tenant}
        return headers | ({"X-Whose-Roles": roles} if roles else {})

    def say(self, speaker: str, text: str, participants: list[str], key: str | None = None) -> str:
        proposition: dict[str, Any] = {"text": text}
        if key is not None:
            proposition["key"] = key
        body = {
            "speaker": speaker,
            "source_id": f"{speaker}-{time.monotonic_ns()}",
            "participants": participants,
            "claims": [{"proposition": proposition}],
        }
        answer = self.http.post(
            "/v1/observations", json=body, headers=self.as_("scribe", "extractor")
        )
        answer.raise_for_status()
        return str(answer.json()["records"][0]["id"])

    def before(self) -> None:
        e = self.e
        for holder, text, audience in e.keepers:
            self.keeper_ids.append((holder, self.say(holder, text, audience)))
        for secret in e.secrets:
            said = f"{e.person}'s {secret.label} is {secret.value}"
            self.say(e.person, said, [e.person, e.second])
        first = e.secrets[0]
        self.say(e.third, f"{e.person}'s {first.label} is {first.value}", [e.third])
        self.say(e.second, f"the temporary gate code is {e.temporary[0]}", [e.second])
        self.say(e.third, f"the temporary number for the pharmacy is {e.temporary[1]}", [e.third])

    def request(self) -> None:
        """'Never keep my …' for each secret, and 'delete those temporary numbers'."""
        e = self.e
        if self.mode == "erasure only":
            for secret in e.secrets:
                for query in (secret.label, secret.value):
                    found = self.recall(e.person, query)
                    for item in found["items"]:
                        if shows(claims_of({"items": [item]}), secret.value):
                            self.http.delete(
                                f"/v1/memories/{item['id']}", headers=self.as_(e.person)
                            )
            for query in ("temporary numbers", "temporary code"):
                found = self.recall("dpo", query)  # abstains: the officer may not read them
                for item in found["items"]:
                    self.http.delete(
                        f"/v1/memories/{item['id']}", headers=self.as_("dpo", "data_protection")
                    )
            return
        for secret in e.secrets:
            rule: dict[str, Any] = {"kind": "value", "value": secret.value}
            if self.mode == "officer's rules":
                rule["subject"] = e.person
                headers = self.as_("dpo", "data_protection")
            else:
                headers = self.as_(e.person)
            self.http.post("/v1/forget-rules", json=rule, headers=headers).raise_for_status()
        body = {
            "kind": "query",
            "query": "the temporary number",
            "min_score": 0.4,
            "max_records": 50,
        }
        self.http.post(
            "/v1/erasures", json=body, headers=self.as_("dpo", "data_protection")
        ).raise_for_status()

    def after(self) -> None:
        """Restatements, after the request."""
        e = self.e
        for secret in e.secrets:
            v = secret.value
            self.say(e.person, f"{v} is deleted, right?", [e.person])
            self.say(e.second, f"{e.person}'s {secret.label} is {v}", [e.second])
            self.say(e.person, f"{e.person} types {v} for the {secret.label}", [e.person, e.second])
            self.say(e.person, f"{e.person}'s {secret.label}: {reformatted(v)}", [e.person])

    def recall(self, who: str, query: str) -> dict[str, Any]:
        body = {"query": query, "limit": 20}
        answer = self.http.post("/v1/recall", json=body, headers=self.as_(who))
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    def leaks(self) -> tuple[int, int, int]:
        """(deleted values still recalled as written, recalled in any form written,
        deleted values in all). A value counts once, whoever recalled it how often."""
        e = self.e
        people = (e.person, e.second, e.third)
        literal = anyform = 0
        targets = [(s.label, s.forms) for s in e.secrets]
        targets += [("temporary number", [t]) for t in e.temporary]
        for label, forms in targets:
            found: set[str] = set()
            for who in people:
                for query in (label, forms[0], "what was deleted?"):
                    text = claims_of(self.recall(who, query))
                    found |= {form for form in forms if shows(text, form)}
            literal += forms[0] in found
            anyform += bool(found)
            kind = "temporary number" if label == "temporary number" else "secret"
            self.leak_sources[f"{kind} leaked as written"] += forms[0] in found
            self.leak_sources.update(
                "as written" if f == forms[0] else "reformatted" for f in found
            )
        return literal, anyform, len(targets)

    def collateral(self) -> tuple[int, int]:
        wrong = 0
        for (holder, record_id), (_, text, _) in zip(self.keeper_ids, self.e.keepers, strict=True):
            got = self.http.get(f"/v1/memories/{record_id}", headers=self.as_(holder))
            lost = got.status_code == 404 or MASK in got.text
            wrong += lost
            self.leak_sources[f"keeper lost: {text}"] += lost
        return wrong, len(self.keeper_ids)


def claims_of(answer: dict[str, Any]) -> str:
    """What an agent reads of a recall: each item's words (never ids, times or scores,
    whose digits would match a code by chance)."""
    words = []
    for item in answer.get("items", []):
        proposition = item.get("proposition") or {}
        words += [item.get("content"), item.get("as_written"), proposition.get("text")]
        words.append(str(proposition.get("value", "")))
    return "\n".join(w for w in words if w)


def shows(text: str, form: str) -> bool:
    """The form as a number of its own (5532 in "PIN 5532", not in "155320")."""
    return re.search(rf"(?<![0-9]){re.escape(form)}(?![0-9])", text) is not None


def run(mode: str, plays: list[Episode], folder: Path) -> dict[str, Any]:
    leaked = reformatted_too = total = wrong = keepers = 0
    sources: Counter[str] = Counter()
    started = time.perf_counter()
    with served(folder) as base, httpx.Client(base_url=base, timeout=60) as http:
        for episode in plays:
            played = Played(http, episode, mode)
            played.before()
            played.request()
            played.after()
            n, anyform, of = played.leaks()
            w, k = played.collateral()
            leaked, reformatted_too, total = leaked + n, reformatted_too + anyform, total + of
            wrong, keepers = wrong + w, keepers + k
            sources += played.leak_sources
    return {
        "mode": mode,
        "deleted_values": total,
        "leaked": leaked,
        "deletion_leak_rate": round(leaked / total, 3),
        "leaked_in_any_form": reformatted_too,
        "leak_rate_in_any_form": round(reformatted_too / total, 3),
        "keepers": keepers,
        "collateral": wrong,
        "collateral_rate": round(wrong / keepers, 3),
        "details": dict(sorted(sources.items())),
        "seconds": round(time.perf_counter() - started, 1),
    }


def write_cost(rules: int, writes: int, folder: Path) -> dict[str, Any]:
    """What standing rules add to a write: `writes` single-record observations in a
    tenant without rules and in one with `rules` value rules (none of which the
    writes carry, so each is matched and none masks), interleaved, medians."""
    import statistics

    with served(folder) as base, httpx.Client(base_url=base, timeout=60) as http:
        for n in range(rules):
            rule = {"kind": "value", "value": f"never-{n:05d}"}
            headers = {"X-Whose-Asker": "amira", "X-Whose-Tenant": "ruled"}
            http.post("/v1/forget-rules", json=rule, headers=headers).raise_for_status()
        seconds: dict[str, list[float]] = {"plain": [], "ruled": []}
        for n in range(writes):
            for tenant in ("plain", "ruled"):
                body = {
                    "speaker": "amira",
                    "source_id": f"s-{n}",
                    "participants": ["amira"],
                    "claims": [{"proposition": {"text": f"the parcel {n} came at {n % 12} pm"}}],
                }
                headers = {"X-Whose-Asker": "amira", "X-Whose-Tenant": tenant}
                started = time.perf_counter()
                http.post("/v1/observations", json=body, headers=headers).raise_for_status()
                seconds[tenant].append(time.perf_counter() - started)
    plain, ruled = (statistics.median(seconds[t]) * 1000 for t in ("plain", "ruled"))
    return {
        "rules": rules,
        "writes": writes,
        "median_ms_without_rules": round(plain, 2),
        "median_ms_with_rules": round(ruled, 2),
        "ratio": round(ruled / plain, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument(
        "--write-cost",
        type=int,
        metavar="RULES",
        help="instead: the median write with RULES standing rules against none",
    )
    args = parser.parse_args()
    if args.write_cost:
        with tempfile.TemporaryDirectory(prefix="whose-forgetting-") as tmp:
            print(json.dumps(write_cost(args.write_cost, 200, Path(tmp) / "sidecar")))
        return
    plays = episodes(args.episodes, args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="whose-forgetting-") as tmp:
        for n, mode in enumerate(MODES):
            results.append(run(mode, plays, Path(tmp) / f"sidecar-{n}"))
            print(json.dumps(results[-1]), flush=True)
    print(f"\n{'mode':<18} {'leaks (as written)':>20} {'(any form)':>16} {'collateral':>14}")
    for r in results:
        leaks = f"{r['leaked']}/{r['deleted_values']} ({r['deletion_leak_rate']:.1%})"
        anyform = f"{r['leaked_in_any_form']} ({r['leak_rate_in_any_form']:.1%})"
        lost = f"{r['collateral']}/{r['keepers']} ({r['collateral_rate']:.1%})"
        print(f"{r['mode']:<18} {leaks:>20} {anyform:>16} {lost:>14}")
    out = REPO / "bench" / "results" / "forgetting_scenarios.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"episodes": args.episodes, "seed": args.seed, "results": results}, indent=2)
        + "\n"
    )


if __name__ == "__main__":
    main()
