"""Recall latency over HTTP at 10k records, k=10, and OPA calls per over-fetch round.

    .venv/bin/python bench/recall_http.py [--records 10000] [--queries 300]

Phase 1 starts `whose serve --dev` on embedded defaults (edge store, its own OPA),
loads the records through POST /v1/memories, waits for the background optimize,
and times POST /v1/recall for three askers whose allow rates are about 0.9
(alice), 0.5 (carol) and 0.1 (bob).

Phase 2 stops the sidecar, opens the same store in-process with an OPA server
on loopback, and runs the same recalls through the over-fetch loop (narrowed by
the policy's pushdown, as recall does), counting OPA's own /v1/data decision
requests per round; it also times the store query and the policy call alone,
for the same queries, as a floor to compare against. Each recall also makes one
Compile API call per audience member: the pushdown.

This is a benchmark, not a test: it prints medians and p99 and writes
bench/results/recall_http.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.audit.sqlite_sink import SqliteSink  # noqa: E402
from sidecar.audit.writer import AuditLog  # noqa: E402
from sidecar.auth.identity import Identity  # noqa: E402
from sidecar.bench.measure import summary as latency_summary  # noqa: E402
from sidecar.embed.hashing import HashingEmbedder  # noqa: E402
from sidecar.policy.cache import LocalCache  # noqa: E402
from sidecar.policy.contract import DisclosureQuestion  # noqa: E402
from sidecar.policy.opa import PolicyClient  # noqa: E402
from sidecar.reads.gate import Gate  # noqa: E402
from sidecar.reads.reader import Bounds, Reader  # noqa: E402
from sidecar.store.edge import EdgeStore  # noqa: E402
from sidecar.store.scope import Scope  # noqa: E402
from tests.conftest import start_opa, start_sidecar, stop  # noqa: E402
from tests.integration.test_policy_client import data_calls  # noqa: E402

TOPICS = [
    f"{a} {b}"
    for a in (
        "launch",
        "budget",
        "hiring",
        "roadmap",
        "vendor",
        "security",
        "pricing",
        "migration",
        "support",
        "design",
    )
    for b in ("date", "owner", "risk", "status", "scope")
]
ATTRIBUTES = [
    "is due",
    "moved to",
    "depends on",
    "was approved by",
    "needs review from",
    "is blocked by",
]
VALUES = ["October 17", "Q3", "the platform team", "legal", "next sprint", "the board", "Friday"]
# audience -> who may read it: alice ~0.9, carol ~0.5, bob ~0.1 of all records
AUDIENCES = [
    (0.1, ["group:launch-team"]),
    (0.4, ["alice", "carol"]),
    (0.4, ["alice"]),
    (0.1, ["dave"]),
]
MODALITIES = ["reported_belief", "asserted", "believed", "inferred"]
ASKERS = {"alice": 0.9, "carol": 0.5, "bob": 0.1}


def dataset(n: int, rng: random.Random) -> list[dict[str, Any]]:
    records = []
    weights = [w for w, _ in AUDIENCES]
    for i in range(n):
        audience = rng.choices([a for _, a in AUDIENCES], weights)[0]
        holder = (
            audience[0]
            if not audience[0].startswith("group:")
            else rng.choice(["alice", "bob", "carol"])
        )
        topic = rng.choice(TOPICS)
        text = f"the {topic} {rng.choice(ATTRIBUTES)} {rng.choice(VALUES)}"
        records.append(
            {
                "content": f"{holder} believes {text}",
                "proposition": {
                    "text": text,
                    "key": topic.replace(" ", "."),
                    "value": f"v{i % 17}",
                },
                "observer_id": holder,
                "source_id": f"session-{i % 500}",
                "source": {"kind": "conversation", "speaker": holder},
                "modality": rng.choice(MODALITIES),
                "confidence": round(rng.uniform(0.3, 1.0), 2),
                "audience": audience,
                "valid_at": "2026-10-01T00:00:00Z",
            }
        )
    return records


def queries(n: int, rng: random.Random) -> list[str]:
    return [f"what about the {rng.choice(TOPICS)}?" for _ in range(n)]


def summary(values_s: list[float]) -> dict[str, float]:
    return latency_summary(values_s) | {"n": len(values_s)}


def load(base: str, records: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    with httpx.Client(base_url=base, timeout=120) as http:
        for i in range(0, len(records), 500):
            batch = records[i : i + 500]
            # Each record is written by its holder, so the write policy sees speaker == observer.
            by_holder: dict[str, list[dict[str, Any]]] = {}
            for r in batch:
                by_holder.setdefault(r["observer_id"], []).append(r)
            for holder, mine in by_holder.items():
                headers = {"X-Whose-Asker": holder, "X-Whose-Tenant": "acme"}
                response = http.post("/v1/memories", json=mine, headers=headers)
                response.raise_for_status()
    return time.perf_counter() - started


def http_phase(base: str, qs: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with httpx.Client(base_url=base, timeout=30) as http:
        for asker in ASKERS:
            headers = {"X-Whose-Asker": asker, "X-Whose-Tenant": "acme"}
            for q in qs[:20]:  # warm-up
                http.post("/v1/recall", json={"query": q, "limit": 10}, headers=headers)
            times, returned, truncated = [], [], 0
            for q in qs:
                t = time.perf_counter()
                response = http.post("/v1/recall", json={"query": q, "limit": 10}, headers=headers)
                times.append(time.perf_counter() - t)
                body = response.json()
                returned.append(len(body["items"]))
                truncated += bool(body.get("truncated"))
            results[asker] = summary(times) | {
                "allow_rate": ASKERS[asker],
                "mean_items": round(statistics.mean(returned), 2),
                "truncated": truncated,
            }
    return results


async def inprocess_phase(
    store_path: Path, opa_url: str, qs: list[str], dim: int
) -> dict[str, Any]:
    store = EdgeStore(store_path, dim)
    await store.open()
    policy = PolicyClient(opa_url, 5.0)
    await policy.start()
    embed = HashingEmbedder(dim).embed
    bounds = Bounds(4, 4, 1000)
    audit = AuditLog(
        SqliteSink(store_path.parent / "bench-audit.sqlite3"), None, queue_size=100_000
    )
    gate = Gate(policy, LocalCache(0, ttl_s=1), audit, bucket_s=5)
    reader = Reader(store, gate, bounds)
    now = datetime.now(UTC)
    results: dict[str, Any] = {}
    try:
        for asker in ASKERS:
            question = DisclosureQuestion(Identity(asker, "acme"), [], "recall", now)
            # As recall does it: the policy's pushdown narrows the store query first.
            pushdown = await gate.begin(question, "bench").pushdown()
            scope = pushdown.narrow(Scope(tenant="acme", current_at=now))
            rounds, calls, store_s, policy_s = 0, 0.0, [], []
            for q in qs:
                vector = embed(q)
                before = data_calls(opa_url)
                # A file-loaded OPA reports no bundle revision: the gate caches nothing.
                found = await reader.overfetch(gate.begin(question, "bench"), vector, scope, 10)
                calls += data_calls(opa_url) - before
                rounds += found.rounds
                # The floor: the first round's store query and policy call, alone.
                t = time.perf_counter()
                hits = await store.search(vector, scope, 40)
                store_s.append(time.perf_counter() - t)
                t = time.perf_counter()
                await policy.disclosure(question, [h.payload for h in hits])
                policy_s.append(time.perf_counter() - t)
            results[asker] = {
                # Decision calls only; each recall also makes one compile call (pushdown).
                "opa_calls_per_round": round(calls / rounds, 3),
                "mean_rounds_per_recall": round(rounds / len(qs), 2),
                "store_query_40": summary(store_s),
                "policy_call_40": summary(policy_s),
            }
    finally:
        await policy.close()
        await store.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    records, qs = dataset(args.records, rng), queries(args.queries, rng)
    workdir = Path(tempfile.mkdtemp(prefix="whose-bench-"))
    report: dict[str, Any] = {"records": args.records, "queries": args.queries, "limit": 10}
    try:
        base, process = start_sidecar(workdir / "data", env={"WHOSE_OPTIMIZE_INTERVAL_S": "1"})
        try:
            report["load_s"] = round(load(base, records), 2)
            time.sleep(8)  # the background optimize builds HNSW after the last write
            report["http_recall"] = http_phase(base, qs)
        finally:
            stop(process)
        opa_url, opa = start_opa(REPO / "rego", workdir / "opa.log")
        try:
            store_path = workdir / "data" / "store" / "whose_memories"
            report["in_process"] = asyncio.run(inprocess_phase(store_path, opa_url, qs, 384))
        finally:
            stop(opa)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out = REPO / "bench" / "results" / "recall_http.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
