"""The benchmark finds a served sidecar's health and metrics where they are: on the
operations listener (WHOSE_OPS_PORT), not the API port, which serves neither."""

from __future__ import annotations

from pathlib import Path

import httpx

from sidecar.bench.measure import histogram
from sidecar.bench.processes import sidecar


def test_the_bench_sidecar_is_ready_and_measured_on_the_operations_listener(
    tmp_path: Path,
) -> None:
    with sidecar(tmp_path / "data") as proc:
        assert proc.ops != proc.base
        assert httpx.get(f"{proc.ops}/readyz").status_code == 200
        # What the benchmark polled before (and so never saw the sidecar start).
        assert httpx.get(f"{proc.base}/healthz").status_code == 404
        assert httpx.get(f"{proc.base}/metrics").status_code == 404
        before = histogram(proc.ops, "whose_request_seconds", route="/v1/recall")
        answer = httpx.post(
            f"{proc.base}/v1/recall",
            json={"query": "launch date", "limit": 5},
            headers={"X-Whose-Asker": "alice", "X-Whose-Tenant": "acme"},
        )
        assert answer.status_code == 200, answer.text
        after = histogram(proc.ops, "whose_request_seconds", route="/v1/recall")
        assert after[1] == before[1] + 1
