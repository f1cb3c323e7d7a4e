"""The embedded default's OPA: a real `opa run --server`, started and stopped by us.

It listens on a Unix socket in a fresh private directory (mode 0700), not on a
TCP port: OPA's REST API accepts policy uploads, and on a shared host any local
process could otherwise rewrite the rules.

The policy directory is loaded as a bundle whose revision is a digest of its
files, as a production OPA loads signed bundles: OPA then reports that revision
with every answer, and the decision cache keys on it (see policy/cache.py). Decision
logging is switched on so that answers carry OPA's decision id, with a drop rule
so that nothing is written: the sidecar's own audit log is the record.

OPA is supervised: if it exits while the sidecar runs (killed, crashed, OOM), it is
started again on the same socket and bundle, so decisions resume without a restart
of the sidecar. Until then every policy call fails closed (the socket does not
answer: PolicyUnavailable). Restarts back off, doubling up to a few seconds, so an
OPA that cannot load its bundle is retried slowly rather than in a busy loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import json
import logging
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from sidecar import metrics

log = logging.getLogger(__name__)


class OpaStartError(RuntimeError):
    pass


# Restart backoff: the first restart after _FIRST_DELAY_S, each failed one doubles
# the wait up to _MAX_DELAY_S. An OPA that then serves for _STABLE_S is healthy again
# and its next exit starts over from _FIRST_DELAY_S; one that crashes soon after
# starting keeps the longer wait, so a crash loop stays slow too.
_FIRST_DELAY_S = 0.5
_MAX_DELAY_S = 8.0
_STABLE_S = 30.0


_DROP_RULE = "/system/log/drop"
_DROP_MODULE = """package system.log

# Every decision log event is dropped: the sidecar keeps its own audit log.
drop := true
"""


def make_bundle(policy_dir: Path, bundle: Path) -> str:
    """Copy the policies and data (no tests) into a bundle directory; return its revision.
    (The linked evaluator, policy/linked_opa.py, loads the same bundle.)"""
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    digest = hashlib.sha256()
    for source in sorted(policy_dir.rglob("*")):
        if not source.is_file() or source.name.endswith("_test.rego"):
            continue
        if source.suffix not in {".rego", ".json"}:
            continue
        relative = source.relative_to(policy_dir)
        content = source.read_bytes()
        digest.update(str(relative).encode() + b"\0" + content + b"\0")
        target = bundle / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    revision = f"sha256:{digest.hexdigest()[:16]}"
    (bundle / "system").mkdir(parents=True, exist_ok=True)
    (bundle / "system" / "log.rego").write_text(_DROP_MODULE)
    manifest = {"revision": revision, "roots": [""]}
    (bundle / ".manifest").write_text(json.dumps(manifest))
    return revision


def _die_with_parent() -> None:
    """In the child, before OPA runs: SIGTERM it when the sidecar process dies, even by
    SIGKILL (a worker its supervisor replaces, sidecar/workers.py), so no OPA lives on
    orphaned (Linux's PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class _Backoff:
    """The waits before successive restart attempts."""

    def __init__(self) -> None:
        self._next = _FIRST_DELAY_S

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(delay * 2, _MAX_DELAY_S)
        return delay

    def reset(self) -> None:
        self._next = _FIRST_DELAY_S


class LocalOpa:
    # With a Unix socket the host part of the URL is ignored.
    url = "http://opa.local"

    def __init__(self, binary: Path, policy_dir: Path, log_file: Path, bundle_dir: Path) -> None:
        self.binary = binary
        self.policy_dir = policy_dir
        self.log_file = log_file
        # Under the data directory, beside opa.log: what the local OPA loaded stays
        # there to be read (the revision is the files' digest, whatever the path).
        self.bundle_dir = bundle_dir
        self._socket_dir: Path | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._ready_at = 0.0
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def socket_path(self) -> Path:
        if self._socket_dir is None:
            raise OpaStartError("OPA is not started")
        return self._socket_dir / "opa.sock"

    async def start(self, ready_timeout_s: float = 15.0) -> None:
        """Start OPA and wait until it serves; then watch it until stop()."""
        if not self.binary.exists():
            raise OpaStartError(f"OPA binary not found at {self.binary}; run `make opa`")
        if not self.policy_dir.is_dir():
            raise OpaStartError(f"policy directory not found at {self.policy_dir}")
        self._socket_dir = Path(tempfile.mkdtemp(prefix="whose-opa-"))
        revision = await asyncio.to_thread(make_bundle, self.policy_dir, self.bundle_dir)
        log.info("local OPA loads %s as bundle revision %s", self.policy_dir, revision)
        try:
            await self._launch(ready_timeout_s)
        except OpaStartError:
            # At start-up a failure is the caller's to report: the sidecar does not start.
            await self.stop()
            raise
        log.info("local OPA started", extra={"opa_pid": self._pid()})
        self._supervisor = asyncio.create_task(
            self._supervise(ready_timeout_s), name="local-opa-supervisor"
        )
        self._supervisor.add_done_callback(_report_crash)

    async def stop(self) -> None:
        # The supervisor goes first, so that the exit we cause is not restarted.
        await self._stop_supervising()
        process, self._process = self._process, None
        if process is not None:
            await _terminate(process)
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    async def _launch(self, ready_timeout_s: float) -> None:
        """One OPA process, serving once this returns; killed again if it does not get there."""
        process = self._process = await self._spawn()
        try:
            await self._wait_ready(process, ready_timeout_s)
        except OpaStartError:
            await _terminate(process)
            raise
        self._ready_at = time.monotonic()

    async def _spawn(self) -> asyncio.subprocess.Process:
        # A killed OPA leaves its socket file behind; remove it rather than rely on
        # the next OPA replacing it.
        self.socket_path.unlink(missing_ok=True)
        try:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            with self.log_file.open("ab") as log_out:
                return await asyncio.create_subprocess_exec(
                    str(self.binary),
                    "run",
                    "--server",
                    "--addr",
                    f"unix://{self.socket_path}",
                    "--unix-socket-perm",
                    "600",
                    "--skip-version-check",
                    "--log-level",
                    "error",
                    "--set",
                    "decision_logs.console=true",
                    "--set",
                    f"decision_logs.drop_decision={_DROP_RULE}",
                    "--bundle",
                    str(self.bundle_dir),
                    stdout=log_out,
                    stderr=log_out,
                    preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                )
        except OSError as exc:  # binary or log file gone: a failed start, to retry later
            raise OpaStartError(f"OPA could not be run: {exc}") from exc

    async def _wait_ready(self, process: asyncio.subprocess.Process, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        connector = aiohttp.UnixConnector(path=str(self.socket_path))
        async with aiohttp.ClientSession(connector=connector) as session:
            while time.monotonic() < deadline:
                if process.returncode is not None:
                    tail = self.log_file.read_text(errors="replace")[-2000:]
                    raise OpaStartError(f"OPA exited during start-up:\n{tail}")
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.get(f"{self.url}/health") as response:
                        if response.status == 200:
                            return
                await asyncio.sleep(0.05)
        raise OpaStartError(f"OPA did not become ready within {timeout_s}s")

    async def _supervise(self, ready_timeout_s: float) -> None:
        """Wait for OPA to exit; start it again each time. Runs until cancelled by stop()."""
        backoff = _Backoff()
        while True:
            process = self._process
            if process is None:  # stop() clears it, but cancels us first: not expected
                return
            code = await process.wait()
            if time.monotonic() - self._ready_at >= _STABLE_S:
                backoff.reset()
            log.warning(
                "local OPA exited unexpectedly (code %s); policy calls fail closed until "
                "it is restarted",
                code,
                extra={"opa_pid": process.pid, "exit_code": code},
            )
            await self._restart(backoff, ready_timeout_s)

    async def _restart(self, backoff: _Backoff, ready_timeout_s: float) -> None:
        """Start OPA again, waiting longer after each failed attempt, until one serves."""
        attempt = 0
        while True:
            attempt += 1
            delay = backoff.next_delay()
            log.info(
                "restarting local OPA in %.1fs (attempt %d)",
                delay,
                attempt,
                extra={"restart_in_s": delay, "attempt": attempt},
            )
            await asyncio.sleep(delay)
            try:
                await self._launch(ready_timeout_s)
            except OpaStartError as exc:
                metrics.LOCAL_OPA_RESTARTS.labels("failed").inc()
                log.error("local OPA did not start: %s", exc, extra={"attempt": attempt})
                continue
            metrics.LOCAL_OPA_RESTARTS.labels("ok").inc()
            log.warning(
                "local OPA restarted; policy calls are answered again",
                extra={"opa_pid": self._pid(), "attempt": attempt},
            )
            return

    async def _stop_supervising(self) -> None:
        task, self._supervisor = self._supervisor, None
        if task is None:
            return
        task.cancel()
        # Wait for it to unwind (a start in progress is cut short; stop() then ends the
        # process it left) without letting its cancellation end our caller's work.
        await asyncio.wait([task])

    def _pid(self) -> int | None:
        return self._process.pid if self._process is not None else None


async def _terminate(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL if OPA is still there after 5 s; reaped either way."""
    if process.returncode is not None:
        return
    # It may have exited on its own a moment ago, not yet reaped: nothing to signal.
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), timeout=5)
    except TimeoutError:
        log.warning("OPA did not stop on SIGTERM; killing it")
        process.kill()
        await process.wait()


def _report_crash(task: asyncio.Task[None]) -> None:
    """Log a supervisor that died of an error: OPA would then stay down unnoticed."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("local OPA supervisor failed; OPA is no longer restarted", exc_info=exc)
