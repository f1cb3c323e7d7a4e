"""`whose adopt` (issue 37 item 5) against a real Qdrant server and the real policy.

A team's collection made with qdrant-client directly (64-d unnamed vectors, LangChain's
payload shape, integer and UUID ids, some points without readers) is adopted as
`whose adopt` runs it (a subprocess: exit code, stdout and stderr as an operator sees
them); then a sidecar on the same server answers qdrant-client per reader. Skipped with
one line where there is no Qdrant server binary.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient
from qdrant_client.http import models as qm

from tests import forks
from tests.acceptance.proxy_world import JWT_ENV, token
from tests.conftest import REPO, free_port
from tests.factories import served
from tests.qdrant_server import QdrantNode, start_node

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

DIM = 64
SOURCE = "kb"
TENANT = "acme"


def unit(seed: int) -> list[float]:
    v = [math.sin(seed * 7.0 + i) for i in range(DIM)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def doc(text: str, audience: list[str] | None, source: str | None = "wiki") -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if audience is not None:
        metadata["audience"] = audience
    if source is not None:
        metadata["source"] = source
    return {"page_content": text, "metadata": metadata}


# Integer and UUID ids; readers vary; four points have no readers (one no source either).
POINTS: dict[int | str, dict[str, Any]] = {
    **{i: doc(f"note {i} for the team", ["alice", "bob"]) for i in range(1, 11)},
    **{i: doc(f"note {i} for alice", ["alice"]) for i in range(11, 16)},
    **{i: doc(f"note {i} for carol", ["carol", "alice"]) for i in range(16, 19)},
    **{
        str(uuid.UUID(int=(7 << 100) + i)): doc(f"page {i} shared", ["bob", "carol"])
        for i in range(5)
    },
    **{i: doc(f"draft {i} nobody labeled", None) for i in range(19, 22)},
    "9f1c2a3e-0000-4000-8000-000000000001": doc("an orphan page", None, None),
}
UNLABELED: set[int | str] = {19, 20, 21, "9f1c2a3e-0000-4000-8000-000000000001"}
LABELED = set(POINTS) - UNLABELED
BOB_SEES = {p for p in LABELED if "bob" in POINTS[p]["metadata"]["audience"]}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QdrantNode]:
    started = start_node(tmp_path_factory.mktemp("adopt-qdrant"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def raw(node: QdrantNode) -> Iterator[QdrantClient]:
    """The team's own collection, made as they made it: on the server, no whose."""
    client = QdrantClient(url=node.url, timeout=30, check_compatibility=False)
    client.create_collection(
        SOURCE, vectors_config=qm.VectorParams(size=DIM, distance=qm.Distance.COSINE)
    )
    client.upsert(
        SOURCE,
        [
            qm.PointStruct(id=p, vector=unit(n), payload=payload)
            for n, (p, payload) in enumerate(POINTS.items())
        ],
        wait=True,
    )
    yield client
    client.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("adopt-data")


def whose(
    node_url: str, data_dir: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`whose adopt` as an operator runs it (reaped by `run`, bounded by its timeout)."""
    environment = {
        **os.environ,
        "WHOSE_STORE": "server",
        "WHOSE_QDRANT_URL": node_url,
        "WHOSE_DATA_DIR": str(data_dir),
        "WHOSE_LOG_LEVEL": "warning",
        **(env or {}),
    }
    return forks.run(["adopt", *args], environment, REPO, timeout=120)


def adopt(node: QdrantNode, data_dir: Path, *more: str) -> subprocess.CompletedProcess[str]:
    done = whose(node.url, data_dir, SOURCE, "--tenant", TENANT, "--as", "alice", *more)
    assert done.returncode == 0, done.stderr
    return done


def stack_collections(client: QdrantClient) -> list[str]:
    return [
        c.name for c in client.get_collections().collections if c.name.startswith("whose_stack_")
    ]


def test_a_dry_run_reports_and_writes_nothing(
    node: QdrantNode, raw: QdrantClient, data_dir: Path
) -> None:
    done = adopt(node, data_dir, "--dry-run", "--batch", "7")
    summary, *reasons = done.stdout.strip().splitlines()
    assert summary.startswith(f"dry run '{SOURCE}' -> '{SOURCE}' (tenant acme, as alice): ")
    assert f"{len(POINTS)} of {len(POINTS)} points seen" in summary
    assert f"{len(LABELED)} would be labeled, {len(UNLABELED)} unlabeled, 0 refused" in summary
    assert summary.endswith("end of collection")
    assert [r.strip() for r in reasons] == [
        "unlabeled missing_metadata:audience: 4 (e.g. 19, 20, 21)",
        "unlabeled missing_metadata:source: 1 (e.g. 9f1c2a3e-0000-4000-8000-000000000001)",
    ]
    # No collection made (opening whose made its own, as `whose serve` does), nothing
    # written, no progress saved.
    assert stack_collections(raw) == []
    assert not (data_dir / "adopt").exists()


def test_a_run_stopped_by_max_resumes_and_finishes(
    node: QdrantNode, raw: QdrantClient, data_dir: Path
) -> None:
    first = adopt(node, data_dir, "--batch", "5", "--max", "12")
    assert "12 of 27 points seen (12 by this run)" in first.stdout
    assert "stopped by --max: run again to go on" in first.stdout
    saved = json.loads((data_dir / "adopt" / f"{TENANT}-{SOURCE}.json").read_text())
    assert saved["done"] is False
    assert saved["offset"] is not None
    assert saved["tally"]["seen"] == 12

    second = adopt(node, data_dir, "--batch", "5")
    summary = second.stdout.splitlines()[0]
    assert f"{len(POINTS)} of {len(POINTS)} points seen (15 by this run)" in summary
    assert f"{len(LABELED)} written, 0 unchanged, {len(UNLABELED)} unlabeled" in summary
    assert summary.endswith("; done")
    assert len(stack_collections(raw)) == 1  # acme's kb

    # Done: a rerun reads nothing; --restart goes over it again and writes nothing new.
    again = adopt(node, data_dir)
    assert "(0 by this run)" in again.stdout
    assert "; done" in again.stdout
    over = adopt(node, data_dir, "--restart")
    # Alice, the adopter, may not read the points told to bob and carol alone: not
    # compared, left as adopted (her own ids are taken); nothing refused.
    hidden = {p for p in LABELED if "alice" not in POINTS[p]["metadata"]["audience"]}
    assert (
        f"0 written, {len(LABELED) - len(hidden)} unchanged, {len(hidden)} adopted before and"
        f" not readable by --as (left as they are), {len(UNLABELED)} unlabeled, 0 refused"
    ) in over.stdout

    # The writes are audited as the write path audits any, under the route `adopt`.
    with sqlite3.connect(data_dir / "audit.sqlite3") as db:
        bodies = [json.loads(b) for (b,) in db.execute("SELECT body FROM entries")]
    adopted = [b for b in bodies if b.get("route") == "adopt"]
    stored = {w["id"] for b in adopted for w in b["written"] if w["outcome"] == "stored"}
    assert len(stored) == len(LABELED)
    assert {b["asker"] for b in adopted} == {"alice"}


def points_seen(base: str, who: str) -> set[int | str]:
    client = QdrantClient(url=base, api_key=token(who), timeout=20, check_compatibility=False)
    try:
        found, _ = client.scroll(SOURCE, limit=100, with_vectors=True)
        for point in found:
            assert isinstance(point.vector, list)
            assert len(point.vector) == DIM
        return {p.id if isinstance(p.id, int) else str(p.id) for p in found}
    finally:
        client.close()


def test_the_sidecar_answers_each_reader_over_the_adopted_points(
    node: QdrantNode, raw: QdrantClient, tmp_path: Path
) -> None:
    env = JWT_ENV | {"WHOSE_STORE": "server", "WHOSE_QDRANT_URL": node.url}
    with served(tmp_path / "sidecar", env, dev=False) as base:
        assert points_seen(base, "bob") == BOB_SEES
        carol = {p for p in LABELED if "carol" in POINTS[p]["metadata"]["audience"]}
        assert points_seen(base, "carol") == carol
        alice = points_seen(base, "alice")
        assert alice == {p for p in LABELED if "alice" in POINTS[p]["metadata"]["audience"]}
        # The unlabeled points: nobody's, not even the adopter's, by id or by search.
        for who in ("alice", "bob", "carol"):
            client = QdrantClient(
                url=base, api_key=token(who), timeout=20, check_compatibility=False
            )
            assert client.retrieve(SOURCE, list(UNLABELED)) == []
            near = client.query_points(SOURCE, query=unit(19), limit=50).points
            assert not {p.id for p in near} & UNLABELED
            client.close()


def test_the_source_collection_is_unchanged(raw: QdrantClient) -> None:
    assert raw.count(SOURCE, exact=True).count == len(POINTS)
    [point] = raw.retrieve(SOURCE, [3], with_payload=True, with_vectors=True)
    assert point.payload == POINTS[3]
    assert point.vector == pytest.approx(unit(2))


def test_failures_are_one_line_and_exit_non_zero(node: QdrantNode, tmp_path: Path) -> None:
    missing = whose(node.url, tmp_path, "nope", "--tenant", TENANT, "--as", "alice")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        f"cannot adopt: source collection 'nope' does not exist on {node.url}"
    )
    away = f"http://127.0.0.1:{free_port()}"
    unreachable = whose(away, tmp_path, SOURCE, "--tenant", TENANT, "--as", "alice")
    assert unreachable.returncode == 2
    assert unreachable.stderr.strip().startswith(f"cannot adopt: Qdrant at {away} is unreachable")
    edge = whose(
        node.url, tmp_path, SOURCE, "--tenant", TENANT, "--as", "alice", env={"WHOSE_STORE": "edge"}
    )
    assert edge.returncode == 2
    assert "set WHOSE_STORE=server and WHOSE_QDRANT_URL" in edge.stderr
    nobody = whose(node.url, tmp_path, SOURCE, "--tenant", TENANT, "--as", " ")
    assert nobody.returncode == 2
    assert nobody.stderr.startswith("cannot adopt: --as and --tenant")
    untold = whose(node.url, tmp_path, SOURCE, "--as", "alice")
    assert untold.returncode == 2
    assert "--tenant" in untold.stderr
