"""The embedded default's OPA: a real `opa run --server`, started and stopped by us.

It listens on a Unix socket in a fresh private directory (mode 0700), not on a
TCP port: OPA's REST API accepts policy uploads, and on a shared host any local
process could otherwise rewrite the rules.

The policy directory is loaded as a bundle whose revision is a digest of its
files, as a production OPA loads signed bundles: OPA then reports that revision
with every answer, and the decision cache keys on it (see cache.py). Decision
logging is switched on so that answers carry OPA's decision id, with a drop rule
so that nothing is written: the sidecar's own audit log is the record.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

import aiohttp

log = logging.getLogger(__name__)


class OpaStartError(RuntimeError):
    pass


_DROP_RULE = "/system/log/drop"
_DROP_MODULE = """package system.log

# Every decision log event is dropped: the sidecar keeps its own audit log.
drop := true
"""


def _make_bundle(policy_dir: Path, bundle: Path) -> str:
    """Copy the policies and data (no tests) into a bundle directory; return its revision."""
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
        revision = await asyncio.to_thread(_make_bundle, self.policy_dir, self.bundle_dir)
        log.info("local OPA loads %s as bundle revision %s", self.policy_dir, revision)
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
                "--set",
                "decision_logs.console=true",
                "--set",
                f"decision_logs.drop_decision={_DROP_RULE}",
                "--bundle",
                str(self.bundle_dir),
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
