"""What the Python client costs over bare httpx: recall latency and client CPU.

    .venv/bin/python bench/client_overhead.py [--calls 300] [--records 200]

Starts `whose serve --dev` on a throw-away store, writes Alice's records, then asks
the same recall with a pooled httpx.Client posting JSON and reading `.json()` (the
baseline), and with WhoseClient (a RecallRequest dumped, the answer validated into
RecallResponse), interleaved twice. Prints the median latency and the client's CPU
per call of each, and their ratio to the baseline of the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.client import DevIdentity, WhoseClient  # noqa: E402
from sidecar.messages import RecallRequest  # noqa: E402
from tests.conftest import as_, start_sidecar, stop  # noqa: E402

QUERY = "when is the launch?"


def measure(call: Callable[[], object], n: int) -> tuple[float, float]:
    for _ in range(10):
        call()
    latencies = []
    cpu = time.process_time()
    for _ in range(n):
        started = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - started)
    return statistics.median(latencies), (time.process_time() - cpu) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--records", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        base, process = start_sidecar(Path(folder))
        try:
            client = WhoseClient(base, dev=DevIdentity("alice", "acme"))
            for start in range(0, args.records, 100):
                client.remember(
                    [
                        {
                            "content": f"Alice believes the launch is day {i}",
                            "proposition": {"text": f"the launch is day {i}", "key": f"k{i}"},
                            "observer_id": "alice",
                            "source_id": "bench",
                            "modality": "believed",
                            "audience": ["alice"],
                        }
                        for i in range(start, min(start + 100, args.records))
                    ]
                )
            bare = httpx.Client(base_url=base, headers=as_("alice"), timeout=30)
            request = RecallRequest(query=QUERY)

            def baseline() -> object:
                return bare.post("/v1/recall", json={"query": QUERY}).json()

            def typed() -> object:
                return client.recall(request)

            runs: dict[str, list[tuple[float, float]]] = {"httpx + .json()": [], "WhoseClient": []}
            for _ in range(2):
                runs["httpx + .json()"].append(measure(baseline, args.calls))
                runs["WhoseClient"].append(measure(typed, args.calls))
            base_latency = statistics.median(r[0] for r in runs["httpx + .json()"])
            base_cpu = statistics.median(r[1] for r in runs["httpx + .json()"])
            print(f"recall of {args.records} records, {args.calls} calls x 2 rounds, interleaved")
            for name, results in runs.items():
                latency = statistics.median(r[0] for r in results)
                cpu = statistics.median(r[1] for r in results)
                print(
                    f"{name:16} p50 {latency * 1000:7.2f} ms ({latency / base_latency:4.2f}x)"
                    f"  client CPU {cpu * 1000:6.3f} ms/call ({cpu / base_cpu:4.2f}x)"
                )
            bare.close()
            client.close()
        finally:
            stop(process)


if __name__ == "__main__":
    main()
