"""The embedded engine's search threads (WHOSE_SEARCH_THREADS, store/__init__.py
`Search.threads`): one by default, as many as set.

The engine holds the GIL for the whole of a call, so a pool of its own (by default
as many threads as the machine has CPUs, and more) only split each search across
threads while the event loop waited: 0.5-1.5 ms of CPU a recall more on 2 cores
(docs/performance.md). The count is what the engine was told, seen from outside:
the threads it starts, by name.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from sidecar.store import Search
from sidecar.store.edge import EdgeStore
from tests.conftest import as_, start_sidecar, stop

POOL = "edge-search-"


def pool_threads(pid: int | str = "self") -> set[str]:
    """The engine's search threads in process `pid`, by thread id."""
    found = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{task}/comm").read_text().strip()
        except OSError:  # ended meanwhile
            continue
        if name.startswith(POOL):
            found.add(task)
    return found


def test_a_served_sidecar_searches_with_one_engine_thread(tmp_path: Path) -> None:
    base, process = start_sidecar(tmp_path)
    try:
        with httpx.Client(base_url=base, timeout=60) as http:
            stored = http.post(
                "/v1/memories",
                headers=as_("alice"),
                json=[
                    {
                        "content": f"note {i}",
                        "observer_id": "alice",
                        "source_id": f"note-{i}",
                        "source": {"kind": "conversation", "speaker": "alice"},
                        "modality": "asserted",
                        "audience": ["alice"],
                    }
                    for i in range(20)
                ],
            )
            assert stored.status_code == 201, stored.text
            found = http.post("/v1/recall", headers=as_("alice"), json={"query": "note"})
            assert found.status_code == 200, found.text
        assert len(pool_threads(process.pid)) == 1  # the whose collection's shard
    finally:
        stop(process)


async def test_the_engine_starts_as_many_search_threads_as_set(tmp_path: Path) -> None:
    # By thread id: another store of this process may still be ending its own.
    before = pool_threads()
    store = EdgeStore(tmp_path / "store", 16, optimize_interval_s=3600, search=Search(threads=3))
    await store.open()
    try:
        assert len(pool_threads() - before) == 3
    finally:
        await store.close()
