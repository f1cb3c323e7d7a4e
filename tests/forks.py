"""Sidecars (and `whose` commands) forked from an interpreter that has imported whose.

A sidecar started as `python -m sidecar serve` spends about 2.5 CPU-seconds importing
(qdrant-client alone is most of it) before it serves, and the suite starts about 170 of
them. Forked from a server process that imported the sidecar once (multiprocessing's
forkserver: single-threaded, preloaded), one starts in about 0.8 CPU-seconds, running the
same `whose serve` code in a process of its own: its own ports, data folder, environment
and log, stopped by a signal as before. `run` does the same for a command that ends
(`whose adopt`, `sweep`, `policy impact`), with stdout and stderr apart.

What is not exercised here is the `python -m sidecar` entry itself, and what an operator
reads when a start fails: the start-up tests (tests/integration/test_startup.py and the
one-line refusals) start it that way.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Protocol

# What the fork server imports once, before it forks anything. Nothing here starts a
# thread or loads the linked OPA (Go's runtime does not survive a fork): both happen
# in the child, when it serves.
PRELOAD = ["sidecar.cli", "sidecar.serving"]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)

_PR_SET_PDEATHSIG = 1


def _serve(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """The child: `whose <argv>` with its own environment, its output into files."""
    # Stop with the fork server (it stops when the test worker does, even killed), so a
    # worker that dies mid-module leaves no sidecar behind.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = ["whose", *argv]
    from sidecar.cli import app

    code = 0
    try:
        app(argv, prog_name="whose")
    except SystemExit as exited:
        code = exited.code if isinstance(exited.code, int) else int(exited.code is not None)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


class Process(Protocol):
    """A process a test started and stops: a subprocess.Popen, or a Forked sidecar."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | Any: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...


_RUNNING: set[Forked] = set()


@atexit.register
def _stop_left_over() -> None:
    """A sidecar a failed fixture never stopped: killed, not waited for by
    multiprocessing's own exit handler (it joins every child, which would hang)."""
    for forked in list(_RUNNING):
        forked.kill()
        forked.wait()


class Forked:
    """A forked sidecar, with the part of subprocess.Popen's interface the tests use."""

    def __init__(
        self, argv: list[str], env: dict[str, str], cwd: Path, log: Path, err: Path | None = None
    ) -> None:
        """`whose <argv>`; its stdout into `log` (emptied first), stderr too unless `err`."""
        self.args = ["whose", *argv]
        log.write_bytes(b"")
        if err is not None:
            err.write_bytes(b"")
        outputs = (str(log), str(err or log))
        self._process = _context.Process(
            target=_serve, args=(argv, env, str(cwd), *outputs), daemon=False
        )
        self._process.start()
        assert self._process.pid is not None
        self.pid: int = self._process.pid
        _RUNNING.add(self)

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        _RUNNING.discard(self)
        return code

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def run(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`whose <argv>` to its end, as subprocess.run(..., capture_output=True, text=True)."""
    with tempfile.TemporaryDirectory(prefix="whose-cli-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        forked = Forked(argv, env, cwd, out, err)
        try:
            code = forked.wait(timeout)
        except subprocess.TimeoutExpired:
            forked.kill()
            forked.wait()
            raise
        return subprocess.CompletedProcess(
            forked.args, code, out.read_text(errors="replace"), err.read_text(errors="replace")
        )
