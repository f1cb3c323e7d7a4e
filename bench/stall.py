"""How much one tenant's costliest request slows another tenant's recall.

    .venv/bin/python bench/stall.py [--records 10000] [--recalls 200] [--attack bounded]

Starts a sidecar on embedded defaults (the engine holds the interpreter during
every store call, so a slow call stalls the whole process), stores `--records`
records in one tenant, and measures another tenant's recall latency twice: on a
quiet sidecar, then while the first tenant keeps `--in-flight` of the costliest
requests it can send in flight. `--attack bounded` is the costliest request the
filter bounds admit (http/qdrant/caller_filter.py: a count over every point, with as many broad
conditions as the bounds allow); `--attack unbounded` is the request
that stalled everyone before there were bounds (a count whose `text_any` holds
100 000 words), to run against a checkout without them (`--checkout`).

Prints, and writes to bench/results/stall.json, p50/p99 of both phases and how
the attacker's requests were answered.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.embed.hashing import HashingEmbedder  # noqa: E402
from tests.conftest import start_sidecar, stop  # noqa: E402

COLLECTION = "whose_memories"
embed = HashingEmbedder(384).embed


def attacker_filter(kind: str) -> dict[str, Any]:
    if kind == "unbounded":
        return {"must": [{"key": "content", "match": {"text_any": "tok " * 100_000}}]}
    from sidecar.http.qdrant.caller_filter import MAX_CONDITIONS

    # The costliest shape measured within the bounds (http/qdrant/caller_filter.py): as
    # many broad range conditions on an indexed datetime as allowed, each matching every
    # point.
    ranges = [
        {"key": "recorded_at", "range": {"gt": f"2000-01-{1 + i % 28:02d}T00:00:00Z"}}
        for i in range(MAX_CONDITIONS - 1)
    ]
    return {"must": [{"should": ranges}]}


def seed(base: str, records: int) -> None:
    headers = {"X-Whose-Asker": "alice", "X-Whose-Tenant": "acme"}
    rng = random.Random(7)
    with httpx.Client(base_url=base, timeout=120) as http:
        for start in range(0, records, 500):
            batch = [
                {
                    "content": f"alice notes item {i} about topic {rng.randrange(50)}",
                    "observer_id": "alice",
                    "source_id": "bench",
                    "modality": "believed",
                    "audience": ["alice"],
                    "valid_at": "2026-10-01T00:00:00Z",
                }
                for i in range(start, min(start + 500, records))
            ]
            response = http.post("/v1/memories", json=batch, headers=headers)
            response.raise_for_status()
        victim = {"X-Whose-Asker": "vic", "X-Whose-Tenant": "globex"}
        for i in range(50):
            body = {
                "content": f"vic notes {i}",
                "observer_id": "vic",
                "source_id": "bench",
                "modality": "believed",
                "audience": ["vic"],
                "valid_at": "2026-10-01T00:00:00Z",
            }
            http.post("/v1/memories", json=body, headers=victim).raise_for_status()


def recalls(base: str, count: int) -> list[float]:
    headers = {"X-Whose-Asker": "vic", "X-Whose-Tenant": "globex"}
    seconds = []
    with httpx.Client(base_url=base, timeout=120) as http:
        for i in range(count):
            started = time.perf_counter()
            response = http.post("/v1/recall", json={"query": f"notes {i}"}, headers=headers)
            seconds.append(time.perf_counter() - started)
            response.raise_for_status()
    return seconds


def attack(base: str, kind: str, stop_at: threading.Event, statuses: list[int]) -> None:
    headers = {"X-Whose-Asker": "alice", "X-Whose-Tenant": "acme"}
    body = {"filter": attacker_filter(kind), "exact": False}
    with httpx.Client(base_url=base, timeout=300) as http:
        while not stop_at.is_set():
            started = time.perf_counter()
            response = http.post(
                f"/collections/{COLLECTION}/points/count", json=body, headers=headers
            )
            statuses.append(response.status_code)
            statuses.append(-round((time.perf_counter() - started) * 1000))


def summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "n": len(ordered),
        "p50_ms": round(1000 * statistics.median(ordered), 2),
        "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
        "max_ms": round(1000 * ordered[-1], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--in-flight", type=int, default=2)
    parser.add_argument("--attack", choices=["bounded", "unbounded"], default="bounded")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "stall.json")
    args = parser.parse_args()
    data = Path(REPO / "bench" / "results" / "stall-data")
    if data.exists():
        import shutil

        shutil.rmtree(data)
    base, process = start_sidecar(data)
    try:
        seed(base, args.records)
        time.sleep(12)  # let the store build its index while nothing else runs
        quiet = recalls(base, args.recalls)
        stop_at = threading.Event()
        answers: list[int] = []
        attackers = [
            threading.Thread(target=attack, args=(base, args.attack, stop_at, answers))
            for _ in range(args.in_flight)
        ]
        for thread in attackers:
            thread.start()
        time.sleep(1)
        loaded = recalls(base, args.recalls)
        stop_at.set()
        for thread in attackers:
            thread.join(timeout=600)
    finally:
        stop(process)
    statuses = [a for a in answers if a >= 0]
    attack_ms = [-a for a in answers if a < 0]
    report = {
        "records": args.records,
        "attack": args.attack,
        "in_flight": args.in_flight,
        "quiet_recall": summary(quiet),
        "recall_under_attack": summary(loaded),
        "attacker_statuses": {str(s): statuses.count(s) for s in sorted(set(statuses))},
        "attacker_request_ms": summary([ms / 1000 for ms in attack_ms]) if attack_ms else None,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
