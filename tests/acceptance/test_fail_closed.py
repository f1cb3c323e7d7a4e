"""OPA unreachable: nothing is disclosed, the response says why, never a 500."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import as_, free_port, ops, start_sidecar, stop


@pytest.fixture(scope="module")
def no_opa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # A port that was free a moment ago and has nobody listening: a real refused connection.
    port = free_port()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    base, process = start_sidecar(
        tmp_path_factory.mktemp("no-opa"), env={"WHOSE_OPA_URL": f"http://127.0.0.1:{port}"}
    )
    yield base
    stop(process)


def test_recall_fails_closed(no_opa: str) -> None:
    response = httpx.post(f"{no_opa}/v1/recall", json={"query": "launch"}, headers=as_("alice"))
    assert response.status_code == 503
    body = response.json()
    assert body["verdict"] == "abstain"
    assert body["items"] == []
    assert body["reason"] == "policy_unavailable"


def test_get_and_write_fail_closed(no_opa: str) -> None:
    got = httpx.get(f"{no_opa}/v1/memories/{uuid.uuid4()}", headers=as_("alice"))
    assert got.status_code == 503
    assert got.json()["error"] == "policy_unavailable"
    record = {
        "content": "x",
        "observer_id": "alice",
        "source_id": "s",
        "modality": "asserted",
        "audience": ["alice"],
    }
    wrote = httpx.post(f"{no_opa}/v1/memories", json=record, headers=as_("alice"))
    assert wrote.status_code == 503
    assert wrote.json()["error"] == "policy_unavailable"


def test_readyz_reports_opa_down(no_opa: str) -> None:
    ready = httpx.get(f"{ops(no_opa)}/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"] == {"opa": False, "store": True}
