"""Turn one run's outputs into summary.json: offered vs achieved rate, failures, latency.

Client-side figures come from locust's CSV (`<prefix>_stats.csv`, whole milliseconds).
Server-side figures come from the sidecar's Prometheus histograms, scraped before and after
the run: the difference of two cumulative histograms is the histogram of this run's calls
alone, and its quantiles are estimated like PromQL's `histogram_quantile` (linear within a
bucket; a quantile in the `+Inf` bucket reports the largest finite bound). Their resolution is
the bucket layout in sidecar/metrics.py (0.5, 1, 2, 5, 10, 20, 50 ms, …).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

SERVER_HISTOGRAMS = {
    "whose_request_seconds": "route",
    "whose_policy_call_seconds": "rule",
    "whose_store_call_seconds": "op",
}


@dataclass
class Histogram:
    """One labelled series: cumulative counts per upper bound, and the total count."""

    buckets: dict[float, float] = field(default_factory=dict)
    count: float = 0.0
    total: float = 0.0

    def minus(self, before: Histogram | None) -> Histogram:
        if before is None:
            return self
        return Histogram(
            {le: n - before.buckets.get(le, 0.0) for le, n in self.buckets.items()},
            self.count - before.count,
            self.total - before.total,
        )

    def quantile(self, q: float) -> float | None:
        """PromQL's histogram_quantile over cumulative buckets; None without observations."""
        if self.count <= 0:
            return None
        rank = q * self.count
        lower, below = 0.0, 0.0
        finite = [le for le in sorted(self.buckets) if math.isfinite(le)]
        for le in sorted(self.buckets):
            cumulative = self.buckets[le]
            if cumulative >= rank:
                if not math.isfinite(le):
                    return finite[-1] if finite else None
                inside = cumulative - below
                return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
            lower, below = le, cumulative
        return finite[-1] if finite else None


Snapshot = dict[tuple[str, str], Histogram]


def parse(text: str) -> Snapshot:
    """The server histograms in a /metrics text, keyed by (metric, label value).

    Series that differ in other labels (a route's methods and statuses) add up.
    """
    found: Snapshot = defaultdict(Histogram)
    for family in text_string_to_metric_families(text):
        label = SERVER_HISTOGRAMS.get(family.name)
        if label is None:
            continue
        for sample in family.samples:
            series = found[(family.name, sample.labels.get(label, ""))]
            if sample.name.endswith("_bucket"):
                le = float(sample.labels["le"])
                series.buckets[le] = series.buckets.get(le, 0.0) + sample.value
            elif sample.name.endswith("_count"):
                series.count += sample.value
            elif sample.name.endswith("_sum"):
                series.total += sample.value
    return dict(found)


def scrape(host: str, headers: dict[str, str] | None = None) -> Snapshot | None:
    """The sidecar's histograms now, or None when /metrics cannot be read."""
    try:
        response = httpx.get(f"{host}/metrics", headers=headers, timeout=10)
    except httpx.HTTPError:
        return None
    return parse(response.text) if response.status_code == 200 else None


def server_latency(before: Snapshot | None, after: Snapshot | None) -> dict[str, Any] | None:
    if before is None or after is None:
        return None
    out: dict[str, Any] = {}
    for (name, label), series in sorted(after.items()):
        run = series.minus(before.get((name, label)))
        if run.count <= 0:
            continue
        p50, p99 = run.quantile(0.5), run.quantile(0.99)
        out.setdefault(name, {})[label or "-"] = {
            "calls": int(run.count),
            "mean_ms": round(1e3 * run.total / run.count, 3),
            "p50_ms": None if p50 is None else round(1e3 * p50, 3),
            "p99_ms": None if p99 is None else round(1e3 * p99, 3),
        }
    return out


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0


def client_stats(stats_csv: Path) -> dict[str, Any]:
    """Per route and aggregated, from locust's `<prefix>_stats.csv`."""
    routes: dict[str, Any] = {}
    aggregated: dict[str, Any] = {}
    with stats_csv.open(newline="") as f:
        for row in csv.DictReader(f):
            entry = {
                "requests": int(_number(row["Request Count"])),
                "failures": int(_number(row["Failure Count"])),
                "rps": round(_number(row["Requests/s"]), 3),
                "p50_ms": _number(row["50%"]),
                "p99_ms": _number(row["99%"]),
                "max_ms": _number(row["Max Response Time"]),
            }
            if row["Name"] == "Aggregated":
                aggregated = entry
            else:
                routes[f"{row['Type']} {row['Name']}"] = entry
    return {"routes": routes, "aggregated": aggregated}


def steady_rate(history_csv: Path) -> float | None:
    """Requests/s between the second and the last row of `<prefix>_stats_history.csv`.

    Skips the first second (every user's first request fires at spawn, a burst) and the
    partial last one; None when the run was too short to have a steady part.
    """
    if not history_csv.exists():
        return None
    with history_csv.open(newline="") as f:
        rows = [
            (int(_number(r["Timestamp"])), _number(r["Total Request Count"]))
            for r in csv.DictReader(f)
            if r["Name"] == "Aggregated" and _number(r["User Count"]) > 0
        ]
    if len(rows) < 4:
        return None
    (t0, n0), (t1, n1) = rows[1], rows[-1]
    return round((n1 - n0) / (t1 - t0), 3) if t1 > t0 else None


def summarize(
    *,
    host: str,
    users: int,
    rate_per_user: float,
    duration_s: float,
    stats_csv: Path,
    history_csv: Path,
    mix: dict[str, Any] | None,
    before: Snapshot | None,
    after: Snapshot | None,
) -> dict[str, Any]:
    client = client_stats(stats_csv)
    total = client["aggregated"]
    offered = users * rate_per_user if rate_per_user > 0 else None
    steady = steady_rate(history_csv)
    achieved = steady if steady is not None else total.get("rps", 0.0)
    return {
        "host": host,
        "users": users,
        "mode": "fixed_rate" if offered else "closed",
        "duration_s": duration_s,
        "offered_rps": offered,
        "achieved_rps": achieved,
        "achieved_rps_overall": total.get("rps", 0.0),
        "achieved_over_offered": round(achieved / offered, 3) if offered else None,
        # Below ~90 % of the offered rate the users could not keep their schedule: the
        # server is saturated and the client latencies understate what callers would see.
        "kept_schedule": None if not offered else achieved >= 0.9 * offered,
        "requests": total.get("requests", 0),
        "failures": total.get("failures", 0),
        "client_latency_ms": client,
        "server_latency": server_latency(before, after),
        "mix": mix,
    }
