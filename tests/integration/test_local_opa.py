"""LocalOpa's supervision: the restart backoff, and stop() in the middle of a restart.

The second test runs the real bin/opa in-process (as the sidecar's lifespan does),
to see the asyncio side directly: no task or process outlives stop().
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from sidecar.policy import local_opa
from sidecar.policy.local_opa import LocalOpa
from tests.conftest import OPA_BINARY, POLICY_DIR


def test_backoff_doubles_up_to_a_cap_and_starts_over_when_reset() -> None:
    backoff = local_opa._Backoff()
    delays = [backoff.next_delay() for _ in range(8)]
    assert delays[0] == local_opa._FIRST_DELAY_S
    assert delays[1] == 2 * delays[0]
    assert max(delays) == delays[-1] == local_opa._MAX_DELAY_S
    assert delays == sorted(delays)
    backoff.reset()
    assert backoff.next_delay() == local_opa._FIRST_DELAY_S


def supervisor_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "local-opa-supervisor"]


async def test_stop_during_a_restart_leaves_no_task_and_no_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if not OPA_BINARY.exists():
        pytest.fail(f"{OPA_BINARY} is missing: run the tests with `make test`")
    caplog.set_level(logging.INFO, logger=local_opa.__name__)
    opa = LocalOpa(OPA_BINARY, POLICY_DIR, tmp_path / "opa.log", tmp_path / "bundle")
    await opa.start()
    try:
        first = opa._process
        assert first is not None
        assert len(supervisor_tasks()) == 1
        os.kill(first.pid, signal.SIGKILL)
        await first.wait()

        # The restarted OPA comes back on the same socket.
        async def restarted() -> bool:
            return opa._process is not first and await _serves(opa)

        await _eventually(restarted, timeout_s=15)
        second = opa._process
        assert second is not None
        assert second.pid != first.pid

        # Killed again, then stopped while the supervisor waits to restart it.
        caplog.clear()
        os.kill(second.pid, signal.SIGKILL)

        async def waiting_to_restart() -> bool:
            return any("restarting local OPA" in r.message for r in caplog.records)

        await _eventually(waiting_to_restart, timeout_s=5)
    finally:
        await opa.stop()
    assert supervisor_tasks() == []
    assert opa._process is None
    await asyncio.sleep(2 * local_opa._FIRST_DELAY_S)  # no restart happens after stop()
    assert opa._process is None
    assert _opa_processes(tmp_path / "bundle") == []


async def _eventually(check: Callable[[], Awaitable[bool]], timeout_s: float) -> None:
    """Poll until check() holds: OPA is another process, with no event to wait on."""
    async with asyncio.timeout(timeout_s):
        while True:
            if await check():
                return
            await asyncio.sleep(0.02)


async def _serves(opa: LocalOpa) -> bool:
    """OPA answers /health on the socket (HTTP/1.0: one request, then it closes)."""
    try:
        reader, writer = await asyncio.open_unix_connection(str(opa.socket_path))
    except OSError:
        return False
    writer.write(b"GET /health HTTP/1.0\r\n\r\n")
    status = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return b" 200 " in status


def _opa_processes(bundle: Path) -> list[str]:
    """Live processes whose command line names this bundle directory."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if str(bundle).encode() in argv:
            found.append(cmdline.parent.name)
    return found
