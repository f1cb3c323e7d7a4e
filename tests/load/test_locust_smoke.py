"""The load harness end to end: a real sidecar, seeded through its API, a short fixed-rate run.

Each run is a subprocess (`python -m loadtests.run`, which runs locust headless), so
locust's gevent patching never enters the test process. Runs are short and bounded, against
loopback only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from loadtests.identities import token_variable
from tests.conftest import REPO, as_, free_port, ops, start_sidecar, stop

ROUTES = {
    "POST /v1/recall",
    "GET /v1/memories/{id}",
    "GET /v1/memories/{id}/history",
    "GET /v1/propositions/{key}",
    "POST /v1/observations",
    "POST /v1/memories",
}


def run_load(
    host: str, out: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    command = [sys.executable, "-m", "loadtests.run", "--host", host, "--out", str(out)]
    command += ["--ops", ops(host), *args]
    finished = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=90
    )
    summary = out / "summary.json"
    assert summary.exists(), finished.stdout + finished.stderr
    return finished.returncode, json.loads(summary.read_text())


SECRET = "load-test-secret-0123456789abcdef0123"  # a throw-away test key


@pytest.fixture(scope="module")
def sidecar(sidecar_dir: Path) -> Iterator[str]:
    """Dev identity (headers) for the main run, and JWTs for the bearer-mode run."""
    base, process = start_sidecar(sidecar_dir, {"WHOSE_JWT_HS256_SECRET": SECRET})
    yield base
    stop(process)


def test_fixed_rate_mix_runs_clean(sidecar: str, tmp_path: Path) -> None:
    # The same offered 10 requests/s as 4 users at 2.5/s over 10 s with 300 seeded (until
    # the suite was sized to fit in 12 minutes in CI), in 6 s: each user still deals
    # its whole 20-card deck (WEIGHTS) at least once, so every task runs.
    code, summary = run_load(
        sidecar, tmp_path, "--users", "2", "--rate", "5", "--duration", "6s",
        "--seed-records", "150",
    )  # fmt: skip
    for name in ("locust_stats.csv", "locust_stats_history.csv", "locust_failures.csv"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert "locust" in (tmp_path / "report.html").read_text().lower()
    assert code == 0, summary
    assert summary["failures"] == 0
    assert set(summary["client_latency_ms"]["routes"]) == ROUTES

    tasks = summary["mix"]["tasks"]
    assert set(tasks) == set(summary["mix"]["weights"])
    for name, seen in tasks.items():
        assert seen["requests"] > 0, f"{name} never ran"
        assert seen["failures"] == 0, (name, seen)
        assert not any(status.startswith("5") for status in seen["statuses"]), (name, seen)
    # Dave's records are hidden from every asker: 404 each time, counted as expected.
    assert json.loads((tmp_path / "seed-ids.json").read_text())["hidden"]
    assert set(tasks["get_hidden"]["statuses"]) == {"404"}
    assert set(tasks["get_pool"]["statuses"]) <= {"200", "404"}

    assert summary["offered_rps"] == pytest.approx(10.0)
    assert 0.7 <= summary["achieved_over_offered"] <= 1.3, summary
    policy = summary["server_latency"]["whose_policy_call_seconds"]
    store = summary["server_latency"]["whose_store_call_seconds"]
    assert policy["whose/disclosure/batch"]["calls"] > 0
    assert policy["whose/ingest/decisions"]["calls"] > 0
    assert store["search"]["calls"] >= tasks["recall"]["requests"]
    recall = summary["server_latency"]["whose_request_seconds"]["/v1/recall"]
    assert recall["calls"] >= tasks["recall"]["requests"]
    for series in (policy["whose/disclosure/batch"], store["search"], recall):
        assert 0 < series["p50_ms"] <= series["p99_ms"]

    # Everything went into the load test's own tenant: the demo tenant holds none of it.
    for tenant, found in (("loadtest", True), ("acme", False)):
        listed = httpx.post(
            f"{sidecar}/collections/whose_memories/points/scroll",
            json={"limit": 5},
            headers=as_("alice", tenant),
        )
        assert listed.status_code == 200, listed.text
        assert bool(listed.json()["result"]["points"]) is found, tenant


@pytest.fixture
def sidecar_without_policy(tmp_path: Path) -> Iterator[str]:
    """A sidecar whose OPA is a closed port: every decision fails closed with 503."""
    env = {"WHOSE_OPA_URL": f"http://127.0.0.1:{free_port()}", "WHOSE_OPA_TIMEOUT_S": "0.2"}
    base, process = start_sidecar(tmp_path / "data", env)
    yield base
    stop(process)


def test_server_errors_fail_the_run(sidecar_without_policy: str, tmp_path: Path) -> None:
    code, summary = run_load(
        sidecar_without_policy, tmp_path / "out", "--users", "2", "--rate", "4",
        "--duration", "2s",
    )  # fmt: skip
    assert code == 1
    assert summary["failures"] > 0
    recall = summary["mix"]["tasks"]["recall"]
    assert recall["statuses"].get("503", 0) > 0
    assert recall["failures"] == recall["requests"]
    failures = (tmp_path / "out" / "locust_failures.csv").read_text()
    assert "server error 503" in failures


def test_bearer_tokens_for_a_deployed_sidecar(sidecar: str, tmp_path: Path) -> None:
    """Token mode: no dev headers, each principal presents its own JWT (seeding included)."""
    exp = int(time.time()) + 600
    tokens = {
        name: jwt.encode({"sub": name, "tenant": "loadtest", "exp": exp}, SECRET, "HS256")
        for name in ("alice", "bob", "carol", "extractor-bot")
    }
    (tmp_path / "tokens.json").write_text(json.dumps({"alice": tokens["alice"]}))
    env = {
        **os.environ,
        # One from a token file, the others from the environment.
        "WHOSE_LOAD_TOKENS_FILE": str(tmp_path / "tokens.json"),
        **{token_variable(n): t for n, t in tokens.items() if n != "alice"},
    }
    code, summary = run_load(
        sidecar, tmp_path / "out", "--users", "3", "--rate", "3", "--duration", "4s",
        "--seed-records", "60", env=env,
    )  # fmt: skip
    assert summary["mix"]["identity_mode"] == "bearer"
    assert code == 0, summary
    assert summary["failures"] == 0
    assert summary["requests"] >= 20

    # A wrong token is refused (401), and the run says so.
    env[token_variable("bob")] = jwt.encode(
        {"sub": "bob", "tenant": "loadtest", "exp": exp},
        "another-secret-0123456789abcdef0123456789",
        "HS256",
    )
    code, summary = run_load(
        sidecar, tmp_path / "bad", "--users", "3", "--rate", "3", "--duration", "2s", env=env
    )
    assert code == 1
    statuses = summary["mix"]["tasks"]["recall"]["statuses"]
    assert statuses.get("401", 0) > 0
