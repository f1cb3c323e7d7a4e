"""A 3-node Qdrant cluster for real, a node killed under traffic from two sidecar workers.

The recipe of docs/operations.md ("A Qdrant cluster"): three `qdrant` processes in
distributed mode on loopback, a collection of 2 shards with 2 replicas each made by
the sidecar itself (WHOSE_QDRANT_SHARDS / _REPLICATION), and `whose serve --workers 2`
given every node's URL, Redis for the locks. Writers update belief chains and
readers recall while the node the workers talk to first is killed (SIGKILL), left
dead, and started again. Then:

- every request was answered 200/201 or 503, never anything else, and both reads
  and writes went on succeeding while the node was dead;
- every record acknowledged with 201 is there once the node is back, on every
  replica (read with consistency `all`) and through the sidecar;
- Bob, who may see none of Alice's notes, never received one;
- each chain stays one line across the workers: no version has two successors,
  and after one more write per chain (which mends a write cut short by the kill,
  docs/design.md §4) each has exactly one current version and two-way links. (A
  write that timed out on a live node waiting for the dead one answers 503 and may
  be applied after the next version of its chain: a fork, which the next write
  mends; test_interrupted_writes.py has it alone.)

Bounded: the traffic lasts about 25 s; the whole test a couple of minutes.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from sidecar.store.schema import point_id
from tests.acceptance.story import said_by
from tests.conftest import as_, stop
from tests.integration.test_supersession import check_chains
from tests.integration.test_workers import Served, start_workers
from tests.qdrant_server import SKIP_REASON, QdrantNode, qdrant_binary, start_cluster

CHAINS = 4
SECRET = "SECRET-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[QdrantNode]]:
    if qdrant_binary() is None:
        # The same one line as every other test that needs the server (conftest).
        pytest.skip(SKIP_REASON)
    nodes = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield nodes
    for node in nodes:
        node.stop()


@pytest.fixture(scope="module")
def served(
    cluster: list[QdrantNode],
    redis_url: str,
    opa_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Served, str]]:
    collection = f"cluster_{uuid.uuid4().hex[:8]}"
    env = {
        "WHOSE_WORKERS": "2",
        "WHOSE_STORE": "server",
        "WHOSE_QDRANT_URL": ",".join(node.url for node in cluster),
        "WHOSE_COLLECTION": collection,
        "WHOSE_QDRANT_SHARDS": "2",
        "WHOSE_QDRANT_REPLICATION": "2",
        "WHOSE_QDRANT_WRITE_CONSISTENCY": "1",
        "WHOSE_REDIS_URL": redis_url,
        "WHOSE_OPA_URL": opa_url,
        "WHOSE_LOCK_WAIT_S": "20",
        "WHOSE_QDRANT_TIMEOUT_S": "3",
    }
    workers = start_workers(tmp_path_factory.mktemp("cluster-sidecar"), env)
    yield workers, collection
    stop(workers.process)


class Traffic:
    """Writers and readers in threads, each answer kept with the time it came."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.answers: list[tuple[float, str, int]] = []  # (when, what, status)
        self.acknowledged: list[str] = []
        self.leaks: list[str] = []
        self.keys = [f"cluster.{uuid.uuid4().hex[:8]}" for _ in range(CHAINS)]
        self.threads = [
            threading.Thread(target=self._writer, args=(key,), daemon=True) for key in self.keys
        ] + [threading.Thread(target=self._reader, daemon=True) for _ in range(2)]

    def __enter__(self) -> Traffic:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def _note(self, what: str, status: int) -> None:
        with self.lock:
            self.answers.append((time.monotonic(), what, status))

    def _writer(self, key: str) -> None:
        n = 0
        with httpx.Client(base_url=self.base, timeout=30) as http:
            while not self.stopping.is_set():
                n += 1
                body = said_by(
                    "alice",
                    f"s{n}",
                    proposition={"text": f"{key} v{n}", "key": key, "value": n},
                    content=f"alice privately believes {key} is v{n} {SECRET}",
                    valid_at=None,
                )
                try:
                    response = http.post("/v1/memories", json=body, headers=as_("alice"))
                except httpx.HTTPError:
                    self._note("write", 0)
                    continue
                self._note("write", response.status_code)
                if response.status_code == 201:
                    with self.lock:
                        self.acknowledged += [r["id"] for r in response.json()["records"]]

    def _reader(self) -> None:
        with httpx.Client(base_url=self.base, timeout=30) as http:
            while not self.stopping.is_set():
                for who in ("bob", "alice"):
                    try:
                        response = http.post(
                            "/v1/recall", json={"query": "cluster", "limit": 20}, headers=as_(who)
                        )
                    except httpx.HTTPError:
                        self._note("read", 0)
                        continue
                    self._note("read", response.status_code)
                    if who == "bob" and SECRET in response.text:
                        self.leaks.append(response.text[:300])

    def between(self, start: float, end: float) -> Counter[tuple[str, int]]:
        with self.lock:
            seen = [(what, status) for when, what, status in self.answers if start <= when < end]
        return Counter(seen)


def settled(nodes: list[QdrantNode], collection: str) -> bool:
    """Every node sees every replica of the collection Active, and no transfer."""
    for node in nodes:
        try:
            info = httpx.get(f"{node.url}/collections/{collection}/cluster", timeout=5).json()
        except (httpx.HTTPError, ValueError):
            return False
        result = info.get("result") or {}
        replicas = result.get("local_shards", []) + result.get("remote_shards", [])
        states = [replica["state"] for replica in replicas]
        if len(states) != 4 or set(states) != {"Active"} or result.get("shard_transfers"):
            return False
    return True


def wait(check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not settled after {timeout} s"
        time.sleep(0.5)


def everything(node: QdrantNode, collection: str) -> list[dict[str, Any]]:
    client = QdrantClient(url=node.url, timeout=30, check_compatibility=False)
    found, offset = [], None
    while True:
        page, offset = client.scroll(
            collection, limit=500, offset=offset, consistency=qm.ReadConsistencyType.ALL
        )
        found += [p.payload for p in page if p.payload]
        if offset is None:
            client.close()
            return found


def test_a_node_killed_under_traffic_loses_nothing_leaks_nothing_forks_nothing(
    cluster: list[QdrantNode], served: tuple[Served, str]
) -> None:
    workers, collection = served
    info = httpx.get(f"{cluster[1].url}/collections/{collection}").json()["result"]["config"]
    assert (info["params"]["shard_number"], info["params"]["replication_factor"]) == (2, 2)
    # The node the workers reach first: its death makes them fail over as well.
    victim = cluster[0]
    with Traffic(workers.base) as traffic:
        time.sleep(4)
        killed = time.monotonic()
        victim.kill()
        time.sleep(10)
        back = time.monotonic()
        victim.start()
        wait(lambda: settled(cluster, collection), 90)
        time.sleep(3)
        ended = time.monotonic()
    assert not traffic.leaks, traffic.leaks[0]
    everything_said = traffic.between(0, ended)
    assert {status for _, status in everything_said} <= {200, 201, 503}, everything_said
    dead = traffic.between(killed + 2, back)
    # While the node was dead, reads and writes went on (a few 503s are allowed).
    assert dead[("write", 201)] > 0, dead
    assert dead[("read", 200)] > 0, dead

    # Nothing acknowledged is lost: on every replica, and through the sidecar.
    acknowledged = set(traffic.acknowledged)
    assert len(acknowledged) > 10
    client = QdrantClient(url=cluster[2].url, timeout=30, check_compatibility=False)
    ids = [point_id("acme", uuid.UUID(i)) for i in sorted(acknowledged)]
    kept = client.retrieve(collection, ids=ids, consistency=qm.ReadConsistencyType.ALL)
    client.close()
    assert len(kept) == len(acknowledged)
    with httpx.Client(base_url=workers.base, timeout=30) as http:
        for record_id in sorted(acknowledged)[:: max(1, len(acknowledged) // 40)]:
            assert http.get(f"/v1/memories/{record_id}", headers=as_("alice")).status_code == 200

        records = everything(cluster[1], collection)
        # No fork, even before anything is mended: no version has two successors.
        successors = Counter(r["supersedes"] for r in records if "supersedes" in r)
        assert all(n == 1 for n in successors.values()), successors.most_common(3)
        # One more write per chain mends what the kill cut short, then: one line each.
        for key in traffic.keys:
            body = said_by("alice", "last", proposition={"text": key, "key": key, "value": 0})
            assert http.post("/v1/memories", json=body, headers=as_("alice")).status_code == 201
    records = everything(cluster[1], collection)
    assert acknowledged <= {r["id"] for r in records}
    check_chains(records)
    print(f"cluster traffic: {dict(everything_said)}; while dead: {dict(dead)}")
