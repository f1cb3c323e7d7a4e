"""Measurements over HTTP: latency one request at a time, throughput with N in flight
(and the CPU each request cost every process named), and where a recall's time goes
from the sidecar's own histograms (read on its operations listener)."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sidecar.bench.processes import Proc

# One request: given a client and a query index, send it and return the response.
Send = Callable[[httpx.Client, int], httpx.Response]
SendAsync = Callable[[httpx.AsyncClient, int], Awaitable[httpx.Response]]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1e3 for s in seconds]
    return {
        "p50_ms": round(statistics.median(ms), 3),
        "p99_ms": round(pct(ms, 0.99), 3),
        "mean_ms": round(statistics.mean(ms), 3),
    }


def one_at_a_time(
    send: Send, n: int, warm_up: int = 10
) -> tuple[list[float], list[httpx.Response]]:
    """Seconds per request and the responses, for requests 0..n-1 one after another
    (after `warm_up` unmeasured ones: connections, the allow-rate estimate)."""
    times, responses = [], []
    with httpx.Client(timeout=60) as http:
        for i in range(min(warm_up, n)):
            send(http, i).raise_for_status()
        for i in range(n):
            started = time.perf_counter()
            response = send(http, i)
            times.append(time.perf_counter() - started)
            response.raise_for_status()
            responses.append(response)
    return times, responses


def closed_loop(
    send: SendAsync, n: int, in_flight: int, procs: dict[str, Proc], split: str | None = None
) -> dict[str, Any]:
    """Requests per second with `in_flight` callers sending requests 0..n-1, and the
    CPU milliseconds each request cost every process in `procs` and this client: on
    a small machine they share the same cores. `split` names a process whose own CPU
    is reported apart from its children's (the sidecar and its local OPA)."""

    async def run() -> tuple[float, list[float]]:
        limits = httpx.Limits(max_connections=max(64, in_flight))
        async with httpx.AsyncClient(timeout=60, limits=limits) as http:
            pending = list(range(n))
            times: list[float] = []

            async def caller() -> None:
                while pending:
                    i = pending.pop()
                    started = time.perf_counter()
                    response = await send(http, i)
                    times.append(time.perf_counter() - started)
                    if response.status_code != 200:
                        # Counted, not fatal: a refusal under load is a result too.
                        failed[f"{response.status_code} {response.json().get('error')}"] += 1

            started = time.perf_counter()
            await asyncio.gather(*(caller() for _ in range(in_flight)))
            return n / (time.perf_counter() - started), times

    failed: Counter[str] = Counter()
    before = {name: proc.cpu() for name, proc in procs.items()}
    split_before = procs[split].cpu_split() if split else (0.0, 0.0)
    client = time.process_time()
    rps, times = asyncio.run(run())
    client = time.process_time() - client
    per = 1e3 / n
    report: dict[str, Any] = {"rps": round(rps, 1)} | {
        k: v for k, v in summary(times).items() if k != "mean_ms"
    }
    for name, proc in procs.items():
        report[f"cpu_ms_{name}"] = round((proc.cpu() - before[name]) * per, 3)
    if split:
        own, children = procs[split].cpu_split()
        report[f"cpu_ms_{split}_own"] = round((own - split_before[0]) * per, 3)
        report[f"cpu_ms_{split}_children"] = round((children - split_before[1]) * per, 3)
    report["cpu_ms_client"] = round(client * per, 3)
    if failed:
        report["not_200"] = dict(failed)
    return report


def histogram(ops: str, name: str, **labels: str) -> tuple[float, float]:
    """The sum and count of a histogram on the server's operations listener, over the
    series with `labels`."""
    total = count = 0.0
    for family in text_string_to_metric_families(httpx.get(f"{ops}/metrics").text):
        for sample in family.samples:
            if labels.items() - sample.labels.items():
                continue
            if sample.name == f"{name}_sum":
                total += sample.value
            elif sample.name == f"{name}_count":
                count += sample.value
    return total, count


# Server-side histograms a recall pass is read from: (metric, labels).
_SERVER_TIMES = {
    "request": ("whose_request_seconds", {"route": "/v1/recall"}),
    "store": ("whose_store_call_seconds", {"op": "search"}),
    "decisions": ("whose_policy_call_seconds", {"rule": "whose/disclosure/batch"}),
    "compile": ("whose_policy_call_seconds", {"rule": "compile"}),
    "rounds": ("whose_overfetch_rounds", {}),
}


def server_times(ops: str, since: dict[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """The recall-related histograms now (sum, count); with `since`, the means per
    recall in between (seconds; rounds per recall)."""
    now = {
        name: histogram(ops, metric, **labels) for name, (metric, labels) in _SERVER_TIMES.items()
    }
    if since is None:
        return now

    def mean(name: str, per: str) -> float:
        return (now[name][0] - since[name][0]) / max(1.0, now[per][1] - since[per][1])

    times = {name: mean(name, per="request") for name in now if name != "rounds"}
    return times | {"rounds": round(mean("rounds", per="rounds"), 2)}


def where_time_goes(client_s: list[float], server: dict[str, float]) -> dict[str, float]:
    """Mean milliseconds per recall: what the client saw, what the server measured,
    and the server's part split into store calls, policy calls and everything else
    (the sidecar's own time)."""
    parts = {
        "client": statistics.mean(client_s),
        "server": server["request"],
        "store_calls": server["store"],
        "policy_calls": server["decisions"] + server["compile"],
    }
    parts["sidecar_own"] = parts["server"] - parts["store_calls"] - parts["policy_calls"]
    parts["http_and_client"] = parts["client"] - parts["server"]
    return {name: round(seconds * 1e3, 3) for name, seconds in parts.items()}
