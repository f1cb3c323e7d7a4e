"""Which HTTP client to reach OPA with: per-call latency and client CPU.

    .venv/bin/python bench/opa_client.py [--calls 500]

Posts the same 40-record disclosure batch to a real OPA server on loopback with
a pooled httpx.AsyncClient and a pooled aiohttp.ClientSession (what
sidecar/policy.py uses; opa-python-client's async client is an aiohttp
session too), and prints the median latency and client CPU per call for each,
twice, interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import httpx
import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import start_opa, stop  # noqa: E402

RULE = "/v1/data/whose/disclosure/batch"


def batch() -> bytes:
    records = [
        {
            "id": f"r{i}",
            "tenant": "acme",
            "observer_id": "alice",
            "modality": "reported_belief",
            "source_id": "s",
            "source": {"kind": "conversation", "speaker": "alice"},
            "audience": ["alice", "group:launch-team"] if i % 2 else ["alice"],
            "valid_at": "2026-10-01T00:00:00Z",
        }
        for i in range(40)
    ]
    asker = {"id": "bob", "tenant": "acme", "groups": [], "roles": [], "scopes": []}
    now = "2026-11-30T00:00:00Z"
    question = {"asker": asker, "audience": [], "purpose": "recall", "now": now, "as_of": now}
    return orjson.dumps({"input": question | {"records": records}})


async def measure(call: Callable[[], Awaitable[None]], n: int) -> tuple[float, float]:
    for _ in range(20):
        await call()
    latencies = []
    cpu = time.process_time()
    for _ in range(n):
        t = time.perf_counter()
        await call()
        latencies.append(time.perf_counter() - t)
    return statistics.median(latencies) * 1e3, (time.process_time() - cpu) / n * 1e3


async def run(url: str, n: int) -> None:
    body, headers = batch(), {"Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=url) as hx, aiohttp.ClientSession(url) as ah:

        async def with_httpx() -> None:
            response = await hx.post(RULE, content=body, headers=headers)
            orjson.loads(response.content)

        async def with_aiohttp() -> None:
            async with ah.post(RULE, data=body, headers=headers) as response:
                orjson.loads(await response.read())

        for name, call in [("httpx", with_httpx), ("aiohttp", with_aiohttp)] * 2:
            p50, cpu = await measure(call, n)
            print(f"{name:8s} p50 {p50:6.3f} ms   client CPU {cpu:6.3f} ms/call")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url, opa = start_opa(REPO / "rego", Path(tmp) / "opa.log")
        try:
            asyncio.run(run(url, args.calls))
        finally:
            stop(opa)


if __name__ == "__main__":
    main()
