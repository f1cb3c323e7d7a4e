"""The embedded store in a process of its own (store/edge_process.py): what is its own.
(The store contract itself runs on it in test_store.py.)

A real child process with the real engine: killed, every call fails closed
(StoreUnavailable, a 503) instead of hanging; closed, no process is left.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest

from sidecar.store import StoreUnavailable
from sidecar.store.edge_process import EdgeProcessStore
from sidecar.store.scope import Scope

DIM = 8


def record(n: int) -> dict[str, object]:
    return {
        "id": str(uuid.uuid4()),
        "tenant": "acme",
        "content": f"note {n}",
        "observer_id": "alice",
        "modality": "asserted",
        "source_id": "s",
        "audience": ["alice"],
        "valid_at": "2026-10-01T00:00:00Z",
    }


async def test_a_dead_store_process_fails_every_call_closed(tmp_path: Path) -> None:
    store = EdgeProcessStore(tmp_path / "edge", DIM)
    await store.open()
    try:
        await store.put("acme", [(record(n), [float(n + 1)] * DIM) for n in range(5)])
        assert len(await store.search([1.0] * DIM, Scope("acme"), 3)) == 3
        assert store._process is not None
        os.kill(store._process.pid, signal.SIGKILL)
        await store._process.wait()
        with pytest.raises(StoreUnavailable):
            await store.search([1.0] * DIM, Scope("acme"), 3)
        with pytest.raises(StoreUnavailable):
            await store.ping()
    finally:
        await store.close()


async def test_close_ends_the_process_and_keeps_what_was_stored(tmp_path: Path) -> None:
    store = EdgeProcessStore(tmp_path / "edge", DIM)
    await store.open()
    assert store._process is not None
    process = store._process
    await store.put("acme", [(record(n), [float(n + 1)] * DIM) for n in range(5)])
    await store.close()
    assert process.returncode == 0
    again = EdgeProcessStore(tmp_path / "edge", DIM)
    await again.open()
    try:
        assert len((await again.find(Scope("acme"), 10)).records) == 5
    finally:
        await again.close()


async def test_a_failed_call_answers_its_caller_and_the_store_goes_on(tmp_path: Path) -> None:
    store = EdgeProcessStore(tmp_path / "edge", DIM)
    await store.open()
    try:
        with pytest.raises(StoreUnavailable):
            await store.search([1.0] * (DIM + 1), Scope("acme"), 3)
        await store.put("acme", [(record(1), [1.0] * DIM)])
        assert len(await store.search([1.0] * DIM, Scope("acme"), 3)) == 1
    finally:
        await store.close()
