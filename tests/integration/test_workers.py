"""`whose serve --workers N` (sidecar/workers.py): real worker processes, a real Qdrant
server, Redis and OPA.

Two workers answer on one API port and one operations port, share chain locks (no
fork under concurrent writes through both), sum their metrics, and a killed worker
is replaced (its local OPA does not outlive it). Configurations the workers could
not share are refused before anything starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.acceptance.story import fresh_key, said_by, write
from tests.conftest import OPS, REPO, as_, free_ports, metric, stop
from tests.qdrant_server import QdrantNode


def workers_of(parent: int) -> list[int]:
    """The worker processes of a `whose serve --workers N` (not multiprocessing's
    resource tracker)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return [
        int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def until(check: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"not true after {timeout} s: {check}")


@dataclass
class Served:
    base: str
    process: subprocess.Popen[bytes]
    log: Path

    def started(self) -> int:
        """Workers that have finished starting so far (uvicorn logs it once each)."""
        return self.log.read_text(errors="replace").count("Application startup complete")


def workers_env(qdrant_server: QdrantNode, redis_url: str, local_opa: str) -> dict[str, str]:
    """Two workers on the server store and Redis, each with its own OPA (the embedded
    policy default: linked into the worker, or a local OPA server beside it)."""
    return {
        "WHOSE_STORE": "server",
        "WHOSE_QDRANT_URL": qdrant_server.url,
        "WHOSE_COLLECTION": f"workers_{uuid.uuid4().hex[:8]}",
        "WHOSE_WORKERS": "2",
        "WHOSE_REDIS_URL": redis_url,
        "WHOSE_LOCK_WAIT_S": "20",
        "WHOSE_LOCAL_OPA": local_opa,
    }


@pytest.fixture(scope="module")
def two_workers(
    tmp_path_factory: pytest.TempPathFactory,
    qdrant_server: QdrantNode,
    redis_url: str,
) -> Iterator[Served]:
    """Each worker with OPA linked in (the embedded default)."""
    folder = tmp_path_factory.mktemp("workers")
    served = start_workers(folder, workers_env(qdrant_server, redis_url, "linked"))
    yield served
    stop(served.process)


def start_workers(folder: Path, env: dict[str, str], timeout: float = 180) -> Served:
    """`whose serve --workers N` (N from WHOSE_WORKERS), once every worker has started.
    Spawned workers import everything afresh: on a loaded 2-core machine that took
    30 s and more, hence the long wait."""
    port, ops_port = free_ports(2)
    command = [sys.executable, "-m", "sidecar", "serve", "--dev", "--port", str(port)]
    command += ["--ops-port", str(ops_port), "--data-dir", str(folder)]
    log = folder / "sidecar.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}, cwd=REPO
        )
    base = f"http://127.0.0.1:{port}"
    OPS[base] = f"http://127.0.0.1:{ops_port}"
    served = Served(base, process, log)
    count = int(env["WHOSE_WORKERS"])
    try:
        until(lambda: len(workers_of(process.pid)) == count and served.started() == count, timeout)
    except AssertionError:
        stop(process)
        raise AssertionError(f"workers did not start:\n{log.read_text()[-3000:]}") from None
    return served


def test_two_workers_share_chain_locks_and_both_serve(
    two_workers: Served,
) -> None:
    base, process = two_workers.base, two_workers.process
    workers = workers_of(process.pid)
    before = {pid: cpu_seconds(pid) for pid in workers}
    key = fresh_key()

    def update(n: int) -> int:
        body = said_by("alice", f"s{n}", proposition={"text": f"v{n}", "key": key, "value": n})
        # A connection per write: each is accepted by whichever worker is free.
        with httpx.Client(base_url=base, timeout=60) as http:
            return write(http, "alice", body).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(update, range(24))) == {201}
    used = {pid: cpu_seconds(pid) - before[pid] for pid in workers}
    # Both workers took writes (an idle worker uses next to no CPU).
    assert all(seconds > 0.05 for seconds in used.values()), used
    with httpx.Client(base_url=base, timeout=30) as http:
        found = http.post(
            "/v1/recall",
            json={"query": "v", "about": key, "include_history": True, "limit": 50},
            headers=as_("alice"),
        ).json()
        assert len(found["items"]) == 24
        assert [i["status"] for i in found["items"]].count("current") == 1
        newest = next(i for i in found["items"] if i["status"] == "current")
        chain = http.get(f"/v1/memories/{newest['id']}/history", headers=as_("alice")).json()
    # One line: 24 versions, each superseding the one before.
    assert len(chain["items"]) == 24
    links = [(i.get("supersedes"), i["id"]) for i in chain["items"]]
    assert [s for s, _ in links[1:]] == [i for _, i in links[:-1]]


def test_metrics_are_summed_across_workers(
    two_workers: Served,
) -> None:
    base = two_workers.base
    route = {"method": "POST", "route": "/v1/recall", "status": "200"}
    before = metric(base, "whose_request_seconds_count", **route)
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(
            pool.map(
                lambda _: httpx.post(
                    f"{base}/v1/recall", json={"query": "launch"}, headers=as_("bob"), timeout=30
                ).raise_for_status(),
                range(20),
            )
        )
    # Whichever worker answers the scrape, it counts every worker's requests.
    for _ in range(6):
        assert metric(base, "whose_request_seconds_count", **route) == before + 20


def test_a_killed_worker_is_replaced_and_its_opa_goes_with_it(two_workers: Served) -> None:
    """OPA linked in: on the module's workers (after the tests above, which count on
    both workers being the first two; a replacement serves in the victim's place)."""
    killed_and_replaced(two_workers, "linked")


def test_a_killed_worker_is_replaced_and_its_opa_server_goes_with_it(
    qdrant_server: QdrantNode, redis_url: str, tmp_path: Path
) -> None:
    served = start_workers(tmp_path, workers_env(qdrant_server, redis_url, "server"))
    try:
        killed_and_replaced(served, "server")
    finally:
        stop(served.process)


def killed_and_replaced(served: Served, local_opa: str) -> None:
    base, process = served.base, served.process
    started = served.started()
    victim, survivor = workers_of(process.pid)
    # A local OPA server is a child of its worker; OPA linked in is the worker itself.
    opas = _opas_of(victim)
    assert len(opas) == (1 if local_opa == "server" else 0)
    os.kill(victim, signal.SIGKILL)
    # The other worker answers at once; the API never goes away.
    for _ in range(10):
        answer = httpx.post(f"{base}/v1/recall", json={"query": "x"}, headers=as_("bob"))
        assert answer.status_code == 200
    until(lambda: len(workers_of(process.pid)) == 2 and victim not in workers_of(process.pid))
    [replacement] = set(workers_of(process.pid)) - {survivor}
    assert process.poll() is None
    # The dead worker's OPA exits with it instead of living on, orphaned.
    until(lambda: all(not Path(f"/proc/{o}").exists() or _zombie(o) for o in opas), 20)
    # The replacement starts its own OPA (if a server) and serves.
    until(
        lambda: len(_opas_of(replacement)) == len(opas) and served.started() == started + 1,
        180,  # a spawned worker imports everything afresh: 30 s and more on a loaded machine
    )
    answer = httpx.post(f"{base}/v1/recall", json={"query": "x"}, headers=as_("bob"))
    assert answer.status_code == 200


def _opas_of(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children if b"opa" in Path(f"/proc/{c}/cmdline").read_bytes()]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _serve(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sidecar", "serve", "--dev", "--workers", "2"]
    port, ops_port = free_ports(2)
    command += ["--port", str(port), "--ops-port", str(ops_port)]
    command += ["--data-dir", str(tmp_path)]
    return subprocess.run(
        command,
        env={**os.environ, **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_embedded_store_refuses_more_than_one_worker(tmp_path: Path) -> None:
    done = _serve(tmp_path, {"WHOSE_STORE": "edge"})
    assert done.returncode == 2
    assert "--workers 2 needs WHOSE_STORE=server" in done.stderr


def test_workers_without_redis_are_refused(tmp_path: Path) -> None:
    env = {"WHOSE_STORE": "server", "WHOSE_QDRANT_URL": "http://127.0.0.1:9"}
    done = _serve(tmp_path, env)
    assert done.returncode == 2
    assert "--workers 2 needs WHOSE_REDIS_URL" in done.stderr


@pytest.mark.parametrize(
    ("local_opa", "missing"), [("linked", "WHOSE_OPA_LIBRARY"), ("server", "WHOSE_OPA_BINARY")]
)
def test_a_worker_that_cannot_start_stops_them_all(
    local_opa: str, missing: str, tmp_path: Path
) -> None:
    env = {
        "WHOSE_STORE": "server",
        "WHOSE_QDRANT_URL": "http://127.0.0.1:9",
        "WHOSE_REDIS_URL": "redis://127.0.0.1:9/0",
        "WHOSE_LOCAL_OPA": local_opa,
        missing: str(tmp_path / "no-such-opa"),
    }
    done = _serve(tmp_path, env)
    assert done.returncode == 2
    assert "a worker failed to start" in done.stderr
