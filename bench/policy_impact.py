"""What `whose policy impact` costs: audited reads replayed under a candidate policy, one
run, medians (issue 38, docs/operations.md "The console").

    .venv/bin/python bench/policy_impact.py [--records 300] [--reads 200] [--runs 3]

Starts `whose serve --dev` (embedded defaults: the edge store, OPA linked in when
bin/libwhoseopa.so is there, the audit in <data dir>/audit.sqlite3) and seeds `records`
records: most written through POST /v1/memories (sidecar/bench/dataset.py: audiences
spread over alice, carol, dave, erin, group:launch-team and a scope, supersession
chains), about a fifth through POST /v1/observations (bob speaking in the stand-up, the
team channel and a DM, as in the worked example of docs/policies.md). Then `reads`
reads as alice, bob, carol and dave in turn, half recalls (limit 10) and half reads by
id (of bob's claims half the time), so the audit holds a few thousand (record, read)
pairs (a recall's entry names its withheld records too: about 30 pairs a recall).

Then POST /v1/policy/impact (as a policy admin, dev headers; every pair of the window:
max_decisions 10 000) with two candidates, `runs` times each: the shipped policy itself
(no flips: the replay's own cost) and the worked example's edit
(docs/examples/manager-reports.patch applied to a copy of rego/). Each run's report gives
the pairs decided and its seconds (from the request's start: the candidate unpacked and
loaded, the audit read, every pair decided under both policies); the wall time around
the request is taken too. The candidate's load is timed apart by the same request with
a window no read falls in (`asker` nobody asked as): no pair, so its seconds are the
load and an empty audit query. Last, the size of a read entry as the audit file stores
it (`entries.body`, the entry's JSON). This is a benchmark, not a test: it prints
medians and writes bench/results/policy_impact.json.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.bench.dataset import dataset, load, queries  # noqa: E402
from sidecar.policy.candidate import pack  # noqa: E402
from tests.factories import served  # noqa: E402

POLICY_DIR = REPO / "rego"
EXAMPLE = REPO / "docs" / "examples" / "manager-reports.patch"
READERS = ["alice", "bob", "carol", "dave"]
ADMIN = {"X-Whose-Asker": "pat", "X-Whose-Tenant": "acme", "X-Whose-Roles": "policy-admin"}
AUDITOR = ADMIN | {"X-Whose-Roles": "auditor"}
# Where bob speaks, and who hears him (docs/policies.md, step 3).
CHANNELS = [
    ("launch-standup", ["bob", "dave"]),
    ("team", ["bob", "alice", "carol"]),
    ("dm", ["bob", "alice"]),
]
LIMITS = {"max_decisions": 10_000, "max_seconds": 600, "max_examples": 200}


def as_(who: str) -> dict[str, str]:
    return {"X-Whose-Asker": who, "X-Whose-Tenant": "acme"}


def observations(n: int, rng: random.Random) -> list[dict[str, Any]]:
    """`n` hedged claims of bob's, one observation each, over the three channels."""
    made = []
    for i in range(n):
        channel, participants = CHANNELS[i % len(CHANNELS)]
        made.append(
            {
                "speaker": "bob",
                "source_id": f"{channel}-{i}",
                "channel": channel,
                "participants": participants,
                "claims": [
                    {
                        "proposition": {
                            "text": f"the launch slips {rng.randint(1, 6)} weeks",
                            "key": f"launch.slip.{i}",
                            "value": f"2026-11-{1 + i % 28:02d}",
                        },
                        "hedged": True,
                    }
                ],
            }
        )
    return made


def seed(base: str, records: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """Write the records; the ids stored in acme (what reads by id ask for), and those
    of bob's claims."""
    said = observations(records // 5, rng)
    load(base, dataset(records - len(said), rng))
    bobs: list[str] = []
    with httpx.Client(base_url=base, timeout=300) as http:
        for start in range(0, len(said), 50):
            stored = http.post(
                "/v1/observations", json=said[start : start + 50], headers=as_("extractor-bot")
            )
            stored.raise_for_status()
            bobs += [r["id"] for r in stored.json()["records"]]
        # Every acme record, as the audit of the writes names them.
        entries = http.get(
            "/v1/audit", params={"purpose": "write", "limit": 1000}, headers=AUDITOR
        ).json()["entries"]
    return sorted({w["id"] for e in entries for w in e["written"] if w.get("id")}), bobs


def read(base: str, ids: list[str], bobs: list[str], reads: int, rng: random.Random) -> None:
    """Half recalls, half reads by id (of bob's claims half the time), askers in turn."""
    asked = queries(reads, rng)
    with httpx.Client(base_url=base, timeout=60) as http:
        for i in range(reads):
            who = as_(READERS[(i // 2) % len(READERS)])
            if i % 2 == 0:
                answered = http.post("/v1/recall", json={"query": asked[i]}, headers=who)
            else:
                record = rng.choice(bobs if rng.random() < 0.5 else ids)
                answered = http.get(f"/v1/memories/{record}", headers=who)
            if answered.status_code not in (200, 403, 404):
                answered.raise_for_status()


def impact(base: str, bundle: bytes, **window: str) -> tuple[dict[str, Any], float]:
    """One replay through the route; its report and the wall time around it."""
    started = time.perf_counter()
    answered = httpx.post(
        f"{base}/v1/policy/impact",
        params={**LIMITS, **window},
        content=bundle,
        headers=ADMIN | {"content-type": "application/gzip"},
        timeout=660,
    )
    wall = time.perf_counter() - started
    answered.raise_for_status()
    return answered.json(), wall


def replayed(base: str, bundle: bytes, runs: int) -> dict[str, Any]:
    """`runs` replays and `runs` empty windows (the load alone); medians."""
    reports, walls, loads = [], [], []
    for _ in range(runs):
        report, wall = impact(base, bundle)
        reports.append(report)
        walls.append(wall)
        empty, _ = impact(base, bundle, asker="nobody-asked")
        assert empty["decisions"] == 0, empty
        loads.append(empty["seconds"])
    pairs = statistics.median(r["decisions"] for r in reports)
    seconds = statistics.median(r["seconds"] for r in reports)
    wall = statistics.median(walls)
    load_s = statistics.median(loads)
    flips = reports[0]["flips"]
    assert all(r["flips"] == flips for r in reports), [r["flips"] for r in reports]
    return {
        "pairs": pairs,
        "entries_read": reports[0]["entries_read"],
        "skipped": reports[0]["skipped"],
        "truncated": reports[0]["truncated"],
        "flips": flips,
        "report_seconds": [r["seconds"] for r in reports],
        "report_decisions_per_second": [r["decisions_per_second"] for r in reports],
        "wall_seconds": [round(w, 3) for w in walls],
        "load_seconds": loads,
        "median": {
            "report_seconds": seconds,
            "wall_seconds": round(wall, 3),
            "load_seconds": load_s,
            "pairs_per_second": round(pairs / seconds, 1),
            "opa_evaluations_per_second": round(2 * pairs / seconds, 1),
            "pairs_per_second_without_load": round(pairs / (seconds - load_s), 1),
            "opa_evaluations_per_second_without_load": round(2 * pairs / (seconds - load_s), 1),
        },
    }


def entry_sizes(audit: Path) -> dict[str, Any]:
    """Bytes of each read entry's JSON as the audit file stores it."""
    with sqlite3.connect(f"file:{audit}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT purpose, body FROM entries WHERE purpose IN ('recall', 'get', 'history')"
        ).fetchall()
    sizes: dict[str, list[int]] = {}
    for purpose, body in rows:
        sizes.setdefault(purpose, []).append(len(str(body).encode()))
    every = [s for found in sizes.values() for s in found]
    return {
        "read_entries": len(every),
        "median_bytes": statistics.median(every),
        "by_purpose": {
            p: {"entries": len(s), "median_bytes": statistics.median(s)} for p, s in sizes.items()
        },
        "file_bytes": audit.stat().st_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(38)
    result: dict[str, Any] = {"arguments": vars(args)}
    with tempfile.TemporaryDirectory() as folder:
        shutil.copytree(POLICY_DIR, Path(folder) / "rego")
        subprocess.run(["git", "apply", str(EXAMPLE)], cwd=folder, check=True)
        candidates = {"shipped": pack(POLICY_DIR), "manager_reports": pack(Path(folder) / "rego")}
        data_dir = Path(folder) / "whose"
        with served(data_dir) as base:
            started = time.perf_counter()
            ids, bobs = seed(base, args.records, rng)
            read(base, ids, bobs, args.reads, rng)
            result["setup"] = {
                "records_stored": len(ids),
                "of_them_bobs_claims": len(bobs),
                "seconds": round(time.perf_counter() - started, 1),
                "opa": "linked" if (REPO / "bin" / "libwhoseopa.so").exists() else "server",
            }
            for name, bundle in candidates.items():
                result[name] = replayed(base, bundle, args.runs)
        result["audit"] = entry_sizes(data_dir / "audit.sqlite3")
    print(json.dumps(result, indent=2))
    out = REPO / "bench" / "results" / "policy_impact.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
