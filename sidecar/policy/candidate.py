"""A candidate policy, evaluated by the same kind of engine as the policy in force.

Impact analysis (oversight.py) decides audited reads under a policy that is not in
force: a bundle as `opa build` makes it (or a policy directory packed the same way,
as `whose policy impact` does), uploaded by a policy admin. It is unpacked into a
scratch directory and loaded by a second engine of the kind the sidecar runs: OPA
linked into this process (a second handle in the same library), or a second local
OPA server on a socket of its own. A deployment whose OPA is its own server
(`WHOSE_OPA_URL`) evaluates candidates linked in when the library is there, else with
the local OPA binary. The candidate is never activated: nothing but the replay asks it.
Its signature, if any, is not checked; it is only read.

Whoever uploads it chooses its Rego, so it is confined: compiled without the builtins
that reach outside the evaluation (`CONFINED_OUT`: the network, DNS, the process's
environment), refused if it names one. Otherwise a policy admin's candidate could read
the sidecar's environment (its JWT secret, in `opa.runtime().env`), or anything on the
network the sidecar reaches (the Qdrant server, every tenant's points, through
`http.send`), into the reasons the report shows.
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import tarfile
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from sidecar.errors import CandidateRefused
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.linked_opa import LinkedOpa
from sidecar.policy.local_opa import LocalOpa, OpaStartError
from sidecar.policy.opa import PolicyClient

# A policy is Rego and JSON data: anything else in a bundle is left out, and sizes are
# bounded before anything is written (a bundle is a compressed archive).
MAX_FILES = 2000
MAX_BYTES = 32 * 1024 * 1024
_KEPT = (".rego", ".json")
# What a candidate's engine is compiled without (native/linkedopa `confinedOut`).
CONFINED_OUT = frozenset({"http.send", "net.lookup_ip_addr", "opa.runtime"})


def unpack(bundle: bytes, into: Path) -> int:
    """Write the Rego and JSON files of a gzipped tar bundle under `into`; their count.
    CandidateRefused for anything that is not one, or that would write elsewhere."""
    try:
        archive = tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz")  # noqa: SIM115 (closed below)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise CandidateRefused("not a gzipped tar bundle", ["not_a_bundle"]) from exc
    written, total = 0, 0
    with archive:
        # Member by member, each bound checked as its header is read: the count and the
        # size (of every member, kept or not: the archive is decompressed to skip one)
        # before the next header, so a small upload that inflates to millions of
        # headers or gigabytes is refused early, never listed whole (getmembers).
        for count in range(MAX_FILES + 1):
            try:
                member = archive.next()
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise CandidateRefused("not a gzipped tar bundle", ["not_a_bundle"]) from exc
            if member is None:
                break
            if count == MAX_FILES:
                raise CandidateRefused("too many files", [f"more_than_{MAX_FILES}_files"])
            total += max(member.size, 0)
            if total > MAX_BYTES:
                raise CandidateRefused("bundle too large", [f"more_than_{MAX_BYTES}_bytes"])
            path = PurePosixPath(member.name.lstrip("/"))
            if ".." in path.parts:
                raise CandidateRefused("a path leaves the bundle", ["path_outside_bundle"])
            if not member.isfile() or path.suffix not in _KEPT or path.name.endswith("_test.rego"):
                continue
            try:
                source = archive.extractfile(member)
                if source is None:
                    continue
                target = into.joinpath(*path.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(source.read())
            except (tarfile.TarError, OSError, EOFError) as exc:
                # A truncated member, or a path that is a file and a directory at once.
                raise CandidateRefused("not a gzipped tar bundle", ["not_a_bundle"]) from exc
            written += 1
    if not any(into.rglob("*.rego")):
        raise CandidateRefused("the bundle holds no Rego", ["no_policy"])
    return written


def pack(policy_dir: Path) -> bytes:
    """A policy directory as the gzipped tar bundle `unpack` reads (tests left out)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for source in sorted(policy_dir.rglob("*")):
            if source.is_file() and source.suffix in _KEPT:
                if source.name.endswith("_test.rego"):
                    continue
                archive.add(source, arcname=str(source.relative_to(policy_dir)))
    return buffer.getvalue()


@dataclass(frozen=True)
class Candidates:
    """Opens engines for candidate policies, like the one in force."""

    kind: Literal["linked", "server"]
    library: Path
    binary: Path
    timeout_s: float
    scratch: Path | None = None

    @asynccontextmanager
    async def open(self, bundle: bytes) -> AsyncIterator[PolicyEngine]:
        """An engine with the candidate loaded, closed and its files removed after."""
        if self.scratch is not None:
            self.scratch.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="whose-candidate-", dir=self.scratch))
        try:
            source = folder / "policy"
            source.mkdir()
            unpack(bundle, source)
            async with AsyncExitStack() as stack:
                engine = await self._start(source, folder, stack)
                yield engine
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    async def _start(self, source: Path, folder: Path, stack: AsyncExitStack) -> PolicyEngine:
        engine: PolicyEngine
        try:
            if self.kind == "linked":
                engine = LinkedOpa(
                    self.library, source, folder / "bundle", self.timeout_s, confined=True
                )
            else:
                # `opa run` takes no capabilities: the policy is checked against them
                # first, and the server then loads exactly the files checked.
                await _check_confined(self.binary, source, folder)
                opa = LocalOpa(self.binary, source, folder / "opa.log", folder / "bundle")
                await opa.start(ready_timeout_s=30)
                stack.push_async_callback(opa.stop)
                engine = PolicyClient(opa.url, self.timeout_s, unix_socket=str(opa.socket_path))
            await engine.start()
        except OpaStartError as exc:
            # What OPA said (a compile error, its line) is for the admin who uploaded it.
            raise CandidateRefused(
                "OPA could not load the candidate", ["not_loadable", str(exc)[-2000:]]
            ) from exc
        stack.push_async_callback(engine.close)
        return engine


async def _opa(binary: Path, *args: str) -> tuple[int, bytes]:
    try:
        process = await asyncio.create_subprocess_exec(
            str(binary),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except OSError as exc:
        raise OpaStartError(f"OPA could not be run: {exc}") from exc
    try:
        out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise OpaStartError("OPA did not check the candidate within 60 s") from None
    return process.returncode or 0, out


async def _check_confined(binary: Path, source: Path, folder: Path) -> None:
    """OpaStartError unless the policy under `source` compiles without CONFINED_OUT."""
    code, out = await _opa(binary, "capabilities", "--current")
    if code != 0:
        raise OpaStartError(f"OPA could not list its capabilities: {out[-500:]!r}")
    capabilities = json.loads(out)
    capabilities["builtins"] = [
        b for b in capabilities.get("builtins", []) if b.get("name") not in CONFINED_OUT
    ]
    capabilities["allow_net"] = []
    confined = folder / "capabilities.json"
    confined.write_text(json.dumps(capabilities))
    code, out = await _opa(
        binary, "check", "--bundle", "--capabilities", str(confined), str(source)
    )
    if code != 0:
        raise OpaStartError(out.decode(errors="replace").replace(str(source), "candidate"))
