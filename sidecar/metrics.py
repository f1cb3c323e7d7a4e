"""Prometheus metrics, served at /metrics.

Label values are bounded: a denial reason like `audience_excludes:bob` is counted
under its code (`audience_excludes`), never under a principal's name.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

from prometheus_client import Counter, Gauge, Histogram

# Sub-millisecond to a few seconds: a decision on a Unix socket is ~1 ms, the
# policy timeout is 1 s by default.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

DECISIONS = Counter(
    "whose_decisions",
    "Disclosure decisions per record, by outcome (allow|deny) and reason code.",
    ["outcome", "reason"],
)
POLICY_UNAVAILABLE = Counter(
    "whose_policy_unavailable",
    "Requests refused (503) because OPA was down, slow or malformed: reads, writes, explain.",
)
LOCAL_OPA_RESTARTS = Counter(
    "whose_local_opa_restarts",
    "Attempts to start the embedded OPA again after it exited, by result (ok|failed).",
    ["result"],
)
REQUEST_SECONDS = Histogram(
    "whose_request_seconds",
    "Request latency inside the sidecar, by method, route template and status.",
    ["method", "route", "status"],
    buckets=_LATENCY_BUCKETS,
)
POLICY_SECONDS = Histogram(
    "whose_policy_call_seconds",
    "OPA call latency as seen by the sidecar, by rule.",
    ["rule"],
    buckets=_LATENCY_BUCKETS,
)
STORE_SECONDS = Histogram(
    "whose_store_call_seconds",
    "Store (Qdrant) call latency, by operation.",
    ["op"],
    buckets=_LATENCY_BUCKETS,
)
OVERFETCH_ROUNDS = Histogram(
    "whose_overfetch_rounds",
    "Store-then-policy rounds per recall or proxy search.",
    buckets=(1, 2, 3, 4, 6, 8, 10),
)
TRUNCATED = Counter(
    "whose_recall_truncated",
    "Recalls and proxy searches stopped by the over-fetch bounds before `limit` was met.",
)
PUSHDOWN = Counter(
    "whose_pushdown",
    "Store filters derived from the policy (compiled), or not derivable (fallback: over-fetch).",
    ["result"],
)
CACHE = Counter(
    "whose_decision_cache",
    "Decision cache lookups per record: hit, miss, or bypass (no revision, or cache down).",
    ["result"],
)
# Bound once: the read path counts every batch, and `labels()` is a locked look-up.
CACHE_HIT, CACHE_MISS, CACHE_BYPASS = (CACHE.labels(r) for r in ("hit", "miss", "bypass"))
DECISION_SHARING = Gauge(
    "whose_decision_sharing",
    "How disclosure decisions are shared under the policy revision last settled: 1 on the"
    " mode in force (shape: records alike in what the policy reads share one; record: each"
    " decided and cached alone; uncached: nothing reused, the policy forbids it).",
    ["mode"],
)
ERASURES = Counter(
    "whose_erasures",
    "Records an erasure erased, refused, or (derived from an erased one) flagged or withdrawn.",
    ["outcome", "route"],
)
AUDIT_DROPPED = Counter(
    "whose_audit_dropped",
    "Audit entries lost: the in-memory queue was full, or the local spill file was full,"
    " failed, or held a line that could not be read back.",
)
AUDIT_BUFFERED = Counter(
    "whose_audit_buffered",
    "Audit entries written to the local spill file because Redis was unreachable.",
)


def reason_code(reason: str) -> str:
    return reason.split(":", 1)[0]


def count_decisions(decided: Iterable[tuple[bool, list[str]]]) -> None:
    """Count a batch of decisions (allow, reasons): one increment per label set, not
    per decision, since looking a labelled child up costs more than adding to it."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for allow, reasons in decided:
        if allow:
            counts["allow", ""] += 1
            continue
        for code in {reason_code(r) for r in reasons} or {"unspecified"}:
            counts["deny", code] += 1
    for (outcome, code), n in counts.items():
        DECISIONS.labels(outcome, code).inc(n)
