"""The embedded default's OPA: a real `opa run --server`, started and stopped by us.

It listens on a Unix socket in a fresh private directory (mode 0700), not on a
TCP port: OPA's REST API accepts policy uploads, and on a shared host any local
process could otherwise rewrite the rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
import time
from pathlib import Path

import aiohttp

log = logging.getLogger(__name__)


class OpaStartError(RuntimeError):
    pass


class LocalOpa:
    # With a Unix socket the host part of the URL is ignored.
    url = "http://opa.local"

    def __init__(self, binary: Path, policy_dir: Path, log_file: Path) -> None:
        self.binary = binary
        self.policy_dir = policy_dir
        self.log_file = log_file
        self._socket_dir: Path | None = None
        self._process: asyncio.subprocess.Process | None = None

    @property
    def socket_path(self) -> Path:
        if self._socket_dir is None:
            raise OpaStartError("OPA is not started")
        return self._socket_dir / "opa.sock"

    async def start(self, ready_timeout_s: float = 15.0) -> None:
        if not self.binary.exists():
            raise OpaStartError(f"OPA binary not found at {self.binary}; run `make opa`")
        if not self.policy_dir.is_dir():
            raise OpaStartError(f"policy directory not found at {self.policy_dir}")
        self._socket_dir = Path(tempfile.mkdtemp(prefix="whose-opa-"))
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log_out:
            self._process = await asyncio.create_subprocess_exec(
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
                "--ignore",
                "*_test.rego",
                str(self.policy_dir),
                stdout=log_out,
                stderr=log_out,
            )
        await self._wait_ready(ready_timeout_s)

    async def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        connector = aiohttp.UnixConnector(path=str(self.socket_path))
        async with aiohttp.ClientSession(connector=connector) as session:
            while time.monotonic() < deadline:
                if self._process is None or self._process.returncode is not None:
                    tail = self.log_file.read_text(errors="replace")[-2000:]
                    await self.stop()
                    raise OpaStartError(f"OPA exited during start-up:\n{tail}")
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.get(f"{self.url}/health") as response:
                        if response.status == 200:
                            return
                await asyncio.sleep(0.05)
        await self.stop()
        raise OpaStartError(f"OPA did not become ready within {timeout_s}s")

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), timeout=5)
            except TimeoutError:
                log.warning("OPA did not stop on SIGTERM; killing it")
                process.kill()
                await process.wait()
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
