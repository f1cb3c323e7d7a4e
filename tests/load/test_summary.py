"""The runner's arithmetic and configuration, without a server: quantiles from real
Prometheus histograms, the steady-state rate, identities, durations, the loopback guard."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from loadtests.identities import from_env, token_variable
from loadtests.run import is_loopback, seconds
from loadtests.summary import parse, server_latency, steady_rate

BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


def exposition(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def test_server_quantiles_cover_only_the_run_and_land_in_the_right_bucket() -> None:
    registry = CollectorRegistry()
    policy = Histogram(
        "whose_policy_call_seconds", "", ["rule"], buckets=BUCKETS, registry=registry
    )
    store = Histogram("whose_store_call_seconds", "", ["op"], buckets=BUCKETS, registry=registry)
    for _ in range(1000):  # before the run: slow calls that must not count
        policy.labels("whose/disclosure/batch").observe(0.8)
    before = parse(exposition(registry))

    rng = random.Random(1)
    samples = sorted(rng.uniform(0.002, 0.005) for _ in range(980))
    samples += [0.3] * 20  # a 2 % slow tail: p99 is in it
    for value in samples:
        policy.labels("whose/disclosure/batch").observe(value)
    store.labels("search").observe(0.0007)
    after = parse(exposition(registry))

    figures = server_latency(before, after)
    assert figures is not None
    decisions = figures["whose_policy_call_seconds"]["whose/disclosure/batch"]
    assert decisions["calls"] == 1000
    assert 2.0 <= decisions["p50_ms"] <= 5.0  # the bucket that holds the true median
    assert decisions["p50_ms"] == pytest.approx(1e3 * samples[499], abs=0.5)
    # In the tail's bucket (250, 500] ms, interpolated: 250 + 250 * 10/20; not 800 ms from before.
    assert decisions["p99_ms"] == pytest.approx(375.0)
    assert decisions["mean_ms"] == pytest.approx(1e3 * sum(samples) / 1000, abs=1e-3)
    search = figures["whose_store_call_seconds"]["search"]
    assert search == {"calls": 1, "mean_ms": 0.7, "p50_ms": 0.75, "p99_ms": 0.995}
    assert "compile" not in figures["whose_policy_call_seconds"]  # never observed: absent


def test_a_routes_methods_and_statuses_add_up() -> None:
    registry = CollectorRegistry()
    requests = Histogram(
        "whose_request_seconds",
        "",
        ["method", "route", "status"],
        buckets=BUCKETS,
        registry=registry,
    )
    before = parse(exposition(registry))
    for status in ("200", "404", "404"):
        requests.labels("GET", "/v1/memories/{record_id}", status).observe(0.003)
    figures = server_latency(before, parse(exposition(registry)))
    assert figures is not None
    assert figures["whose_request_seconds"]["/v1/memories/{record_id}"]["calls"] == 3


def test_a_quantile_past_the_last_bucket_reports_its_bound() -> None:
    registry = CollectorRegistry()
    policy = Histogram(
        "whose_policy_call_seconds", "", ["rule"], buckets=BUCKETS, registry=registry
    )
    policy.labels("r").observe(9.0)
    figures = server_latency({}, parse(exposition(registry)))
    assert figures is not None
    assert figures["whose_policy_call_seconds"]["r"]["p99_ms"] == 2500.0
    assert server_latency(None, parse(exposition(registry))) is None


def test_steady_rate_skips_the_first_second_and_the_stopped_rows(tmp_path: Path) -> None:
    history = tmp_path / "h.csv"
    rows = ["Timestamp,User Count,Type,Name,Requests/s,Total Request Count"]
    rows.append("100,0,,Aggregated,0,0")
    counts = [16, 26, 36, 46, 56, 66]  # a burst of 16, then 10 per second
    rows += [f"{101 + i},4,,Aggregated,0,{n}" for i, n in enumerate(counts)]
    rows.append("107,0,,Aggregated,0,70")
    history.write_text("\n".join(rows) + "\n")
    assert steady_rate(history) == 10.0
    history.write_text("\n".join(rows[:4]) + "\n")
    assert steady_rate(history) is None


def test_identities_dev_headers_by_default_and_bearer_once_a_token_is_set(
    tmp_path: Path,
) -> None:
    dev = from_env({})
    assert dev.mode == "dev"
    # A tenant of its own: a load run writes nothing where the demo's story lives.
    assert dev.headers("bob") == {"X-Whose-Asker": "bob", "X-Whose-Tenant": "loadtest"}

    assert token_variable("extractor-bot") == "WHOSE_LOAD_TOKEN_EXTRACTOR_BOT"
    file = tmp_path / "tokens.json"
    file.write_text(json.dumps({"alice": "from-file", "bob": "from-file"}))
    env = {"WHOSE_LOAD_TOKENS_FILE": str(file), "WHOSE_LOAD_TOKEN_BOB": "from-env"}
    bearer = from_env(env)
    assert bearer.mode == "bearer"
    assert bearer.headers("alice") == {"Authorization": "Bearer from-file"}
    assert bearer.headers("bob") == {"Authorization": "Bearer from-env"}
    with pytest.raises(LookupError):
        bearer.headers("carol")
    with pytest.raises(SystemExit, match="WHOSE_LOAD_TOKEN_CAROL"):
        bearer.check()

    file.write_text(json.dumps(["not", "a", "mapping"]))
    with pytest.raises(SystemExit):
        from_env({"WHOSE_LOAD_TOKENS_FILE": str(file)})


def test_durations_and_the_loopback_guard() -> None:
    assert seconds("30s") == 30
    assert seconds("90") == 90
    assert seconds("2m30s") == 150
    assert seconds("1h") == 3600
    for bad in ("", "soon", "0s", "2h"):
        with pytest.raises(Exception, match="duration"):
            seconds(bad)
    assert is_loopback("http://127.0.0.1:8080")
    assert is_loopback("http://localhost:8080")
    assert is_loopback("http://[::1]:8080")
    assert is_loopback("http://127.8.9.10")
    assert not is_loopback("http://10.0.0.5:8080")
    assert not is_loopback("https://whose.example")
