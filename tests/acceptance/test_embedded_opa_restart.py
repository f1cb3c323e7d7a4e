"""The local OPA server is supervised: killed, it comes back without a sidecar restart.

Real processes throughout: `whose serve --dev` with WHOSE_LOCAL_OPA=server starts its own
`opa run --server`; the test finds that child in /proc, SIGKILLs it, and watches
the sidecar fail closed while OPA is gone and recover on its own once it is back.
When the sidecar stops, no OPA process of its may be left behind.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import as_, metric, ops, start_sidecar, stop
from tests.forks import Process

NOTE: dict[str, Any] = {
    "content": "Alice keeps the launch date to herself: October 17",
    "observer_id": "alice",
    "source_id": "launch-sync",
    "modality": "asserted",
    "audience": ["alice"],
}
# How long a killed OPA may take to be serving decisions again.
RECOVERY_S = 15.0
# Rego that does not parse: an OPA started on a bundle holding it exits at once.
BROKEN_REGO = "package whose.broken\n\nthis is not rego\n"


@dataclass
class Sidecar:
    base: str
    data: Path
    process: Process
    note_id: str = ""

    @property
    def bundle(self) -> Path:
        return self.data / "opa-bundle"

    @property
    def log(self) -> Path:
        return self.data / "sidecar.log"


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[Sidecar]:
    data = tmp_path / "data"
    # The local OPA server (WHOSE_LOCAL_OPA=server), not the evaluator linked in:
    # this is about the process the sidecar supervises.
    base, process = start_sidecar(data, env={"WHOSE_LOCAL_OPA": "server"})
    running = Sidecar(base, data, process)
    try:
        wrote = httpx.post(f"{base}/v1/memories", json=NOTE, headers=as_("alice"), timeout=10)
        assert wrote.status_code == 201, wrote.text
        running.note_id = wrote.json()["records"][0]["id"]
        yield running
    finally:
        if process.poll() is None:
            stop(process)
        # Whatever a test did, leave no OPA of this sidecar running.
        for pid in opa_pids(running.bundle):
            os.kill(pid, signal.SIGKILL)


def opa_pids(bundle: Path) -> list[int]:
    """Live `opa run` processes serving this bundle directory (found via /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if b"run" in argv and b"--bundle" in argv and str(bundle).encode() in argv:
            pids.append(int(entry.name))
    return pids


def parent_of(pid: int) -> int:
    # /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, not ")".
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def the_opa_child(sidecar: Sidecar) -> int:
    [pid] = opa_pids(sidecar.bundle)
    assert parent_of(pid) == sidecar.process.pid
    return pid


def running(pid: int) -> bool:
    """Alive and not a zombie (a zombie's cmdline is empty; a reaped pid has none)."""
    try:
        return bool(Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return False


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while running(pid):
        assert time.monotonic() < deadline, f"OPA {pid} did not die"
        time.sleep(0.01)


def recall(sidecar: Sidecar) -> httpx.Response:
    return httpx.post(
        f"{sidecar.base}/v1/recall",
        json={"query": "launch date"},
        headers=as_("alice"),
        timeout=10,
    )


def assert_refused(sidecar: Sidecar) -> None:
    """Fail closed: 503 policy_unavailable on recall and get, nothing disclosed."""
    recalled = recall(sidecar)
    assert recalled.status_code == 503, recalled.text
    body = recalled.json()
    assert (body["verdict"], body["items"], body["reason"]) == ("abstain", [], "policy_unavailable")
    got = httpx.get(f"{sidecar.base}/v1/memories/{sidecar.note_id}", headers=as_("alice"))
    assert (got.status_code, got.json()["error"]) == (503, "policy_unavailable")
    assert NOTE["content"] not in recalled.text + got.text


def sees_note(sidecar: Sidecar) -> bool:
    response = recall(sidecar)
    if response.status_code != 200:
        return False
    return sidecar.note_id in {item["id"] for item in response.json()["items"]}


def wait_for_recovery(sidecar: Sidecar, timeout_s: float = RECOVERY_S) -> float:
    """Poll recall until it answers 200 with the note again; the seconds it took."""
    started = time.monotonic()
    while not sees_note(sidecar):
        elapsed = time.monotonic() - started
        assert elapsed < timeout_s, f"OPA not back after {elapsed:.1f}s:\n{tail(sidecar)}"
        time.sleep(0.1)
    return time.monotonic() - started


def ready(sidecar: Sidecar) -> int:
    return httpx.get(f"{ops(sidecar.base)}/readyz").status_code


def log_lines(sidecar: Sidecar) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in sidecar.log.read_text().splitlines() if line.startswith("{")
    ]


def tail(sidecar: Sidecar) -> str:
    return sidecar.log.read_text(errors="replace")[-3000:]


def restarts_logged(sidecar: Sidecar) -> list[dict[str, Any]]:
    return [line for line in log_lines(sidecar) if line["message"].startswith("local OPA exited")]


def stop_and_assert_clean(sidecar: Sidecar) -> None:
    """The sidecar stops promptly and cleanly, and takes every OPA it started with it."""
    stop(sidecar.process)
    # The sidecar re-raises the SIGTERM it shut down on (serving.py, as uvicorn does):
    # -SIGTERM is a clean stop, not the SIGKILL that conftest's stop() falls back to
    # after 10 s.
    assert sidecar.process.returncode == -signal.SIGTERM, tail(sidecar)
    assert opa_pids(sidecar.bundle) == [], "an OPA process outlived the sidecar"
    text = sidecar.log.read_text(errors="replace")
    for symptom in ("Task was destroyed", "never retrieved", "Traceback", "ResourceWarning"):
        assert symptom not in text, tail(sidecar)
    # The stop is not taken for a crash: no exit is reported and nothing restarted once
    # shutdown has begun (a restart loop already running may still log an attempt
    # until the lifespan reaches OPA), and nothing at all once shutdown is complete.
    messages = [line["message"] for line in log_lines(sidecar)]
    during = messages[messages.index("stopping on SIGTERM") :]
    after = messages[messages.index("stopped: store, policy and audit closed") :]
    crash_or_restart = ("local OPA exited unexpectedly", "local OPA restarted")
    assert not [m for m in during if m.startswith(crash_or_restart)], during
    assert not [m for m in after if "OPA" in m], after


def test_a_killed_opa_is_restarted_and_decisions_resume(sidecar: Sidecar) -> None:
    assert sees_note(sidecar)
    first = the_opa_child(sidecar)

    kill(first)
    # Meanwhile: fail closed, and the sidecar itself is alive (nothing restarts it).
    assert_refused(sidecar)
    assert httpx.get(f"{ops(sidecar.base)}/healthz").status_code == 200

    wait_for_recovery(sidecar)
    assert ready(sidecar) == 200
    second = the_opa_child(sidecar)  # one fresh OPA, still the sidecar's own child
    assert second != first
    [restart] = restarts_logged(sidecar)
    assert restart["level"] == "WARNING"
    assert restart["opa_pid"] == first

    # A second kill is recovered from as well (the supervisor keeps watching).
    kill(second)
    assert_refused(sidecar)
    wait_for_recovery(sidecar)
    assert ready(sidecar) == 200
    assert the_opa_child(sidecar) not in (first, second)
    assert metric(sidecar.base, "whose_local_opa_restarts_total", result="ok") == 2

    stop_and_assert_clean(sidecar)


def test_an_opa_that_cannot_load_is_retried_with_backoff(sidecar: Sidecar) -> None:
    assert sees_note(sidecar)
    # The restart uses the bundle on disk; make it unloadable, then kill OPA.
    broken = sidecar.bundle / "whose" / "broken.rego"
    broken.write_text(BROKEN_REGO)
    kill(the_opa_child(sidecar))

    # For as long as OPA cannot start, every request fails closed, and /readyz says so.
    outage_s = 4.0
    started = time.monotonic()
    while time.monotonic() - started < outage_s:
        assert_refused(sidecar)
        assert ready(sidecar) == 503
        time.sleep(0.2)
    failed = [line for line in log_lines(sidecar) if "did not start" in line["message"]]
    assert failed, tail(sidecar)
    # Bounded backoff: a handful of attempts in four seconds, not a busy loop.
    assert len(failed) <= 5, [line["message"] for line in failed]

    broken.unlink()
    wait_for_recovery(sidecar)
    assert ready(sidecar) == 200
    the_opa_child(sidecar)
    stop_and_assert_clean(sidecar)


def test_stopping_while_opa_is_down_leaves_no_opa_behind(sidecar: Sidecar) -> None:
    (sidecar.bundle / "whose" / "broken.rego").write_text(BROKEN_REGO)
    kill(the_opa_child(sidecar))
    assert_refused(sidecar)
    time.sleep(1.0)  # inside the restart loop: waiting, or starting an OPA that will exit
    assert restarts_logged(sidecar), tail(sidecar)
    stop_and_assert_clean(sidecar)
