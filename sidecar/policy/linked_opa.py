"""The embedded default's policy, evaluated in this process by OPA's own evaluator.

OPA's Go evaluator, built from the pinned OPA module into a C shared library
(native/linkedopa, `make install`: bin/libwhoseopa.so), is loaded with ctypes. It
answers the policy engine's questions (policy/engine.py) as the OPA server does — the
disclosure batch, the write policy, explain, partial evaluation for pushdown — with
no HTTP, no socket and no second process: the policy's evaluation is what a decision
costs. ctypes releases the interpreter for the length of each call, so other
requests' Python runs while OPA evaluates.

The policy directory is made into the same bundle the local OPA server would load
(policy/local_opa.py `make_bundle`: its revision is a digest of the files), loaded
once at start; every answer reports that revision, which keys the decision cache.
A changed policy takes a restart, as with the local OPA server. At start the library
also computes what the disclosure decision reads of a record from the compiled
policy (native/linkedopa/readset.go, policy/readset.py); `analyse_bundle` does the
same for the bundle the local OPA server loads.

Fail closed exactly as the client does: an evaluation error, an undefined result,
a malformed answer or a call past its deadline raises PolicyUnavailable (the
deadline is OPA's own cancellation of the query, so a runaway policy stops).
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from sidecar import metrics
from sidecar.errors import PolicyUnavailable
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.engine import (
    DISCLOSURE_RULE,
    POLICY_ROOT,
    OpaAnswer,
    PolicyEngine,
    Untranslatable,
)
from sidecar.policy.local_opa import OpaStartError, make_bundle
from sidecar.policy.readset import MalformedReadSet, ReadSet

log = logging.getLogger("whose.policy")

# The library's status codes (native/linkedopa/main.go).
_OK, _UNDEFINED, _REFUSED, _FAILED = 0, 1, 2, 3

_Out = ctypes.POINTER(ctypes.c_char)
# How much longer than the deadline a call may take before the request stops waiting.
_GRACE_S = 0.05


@functools.cache
def _library(path: Path) -> ctypes.CDLL:
    """The library, loaded once per process (Go's runtime cannot be loaded twice)."""
    lib = ctypes.CDLL(str(path))
    lib.whose_opa_open.argtypes = [
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.POINTER(_Out),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.whose_opa_open.restype = ctypes.c_size_t
    # A library built before confined engines existed has no such entry point: a
    # candidate is then refused (_Engine), never loaded unconfined.
    if hasattr(lib, "whose_opa_open_confined"):
        lib.whose_opa_open_confined.argtypes = lib.whose_opa_open.argtypes
        lib.whose_opa_open_confined.restype = ctypes.c_size_t
    lib.whose_opa_eval.argtypes = [
        ctypes.c_size_t,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_int64,
        ctypes.POINTER(_Out),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_int64),
    ]
    lib.whose_opa_eval.restype = ctypes.c_int
    lib.whose_opa_compile.argtypes = [
        ctypes.c_size_t,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_int64,
        ctypes.POINTER(_Out),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.whose_opa_compile.restype = ctypes.c_int
    lib.whose_opa_readset.argtypes = [
        ctypes.c_size_t,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.POINTER(_Out),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.whose_opa_readset.restype = ctypes.c_int
    lib.whose_opa_close.argtypes = [ctypes.c_size_t]
    lib.whose_opa_close.restype = None
    lib.whose_opa_free.argtypes = [ctypes.c_void_p]
    lib.whose_opa_free.restype = None
    return lib


class _Engine:
    """One loaded bundle in the library: synchronous calls, each in the calling thread."""

    def __init__(self, library: Path, bundle: Path, confined: bool = False) -> None:
        """`confined`: compiled without the builtins that reach outside the evaluation
        (http.send, net.lookup_ip_addr, opa.runtime: native/linkedopa `confined`), as a
        candidate policy someone uploaded is."""
        self.lib = _library(library)
        out, size = _Out(), ctypes.c_size_t()
        encoded = str(bundle).encode()
        if confined and not hasattr(self.lib, "whose_opa_open_confined"):
            raise OpaStartError(
                f"the OPA library at {library} cannot confine a policy: rebuild it (`make install`)"
            )
        opener = self.lib.whose_opa_open_confined if confined else self.lib.whose_opa_open
        handle = opener(encoded, len(encoded), ctypes.byref(out), ctypes.byref(size))
        about = self._take(out, size)
        if not handle:
            raise OpaStartError(f"OPA could not load the policy: {about.decode(errors='replace')}")
        self.handle: int = handle
        loaded = orjson.loads(about)
        self.revision: str = loaded["revision"]
        self.roots: list[str] = loaded["roots"]

    def eval(self, path: bytes, input_: bytes, timeout_ns: int) -> tuple[int, bytes, int]:
        out, size, spent = _Out(), ctypes.c_size_t(), ctypes.c_int64()
        status = self.lib.whose_opa_eval(
            self.handle,
            path,
            len(path),
            input_,
            len(input_),
            timeout_ns,
            ctypes.byref(out),
            ctypes.byref(size),
            ctypes.byref(spent),
        )
        return status, self._take(out, size), spent.value

    def compile(self, request: bytes, timeout_ns: int) -> tuple[int, bytes]:
        out, size = _Out(), ctypes.c_size_t()
        status = self.lib.whose_opa_compile(
            self.handle, request, len(request), timeout_ns, ctypes.byref(out), ctypes.byref(size)
        )
        return status, self._take(out, size)

    def read_set(self, rule: bytes) -> ReadSet:
        """What `rule` reads of the records of its input (policy/readset.py); an
        analysis that fails is a read set that caches nothing."""
        out, size = _Out(), ctypes.c_size_t()
        status = self.lib.whose_opa_readset(
            self.handle, rule, len(rule), ctypes.byref(out), ctypes.byref(size)
        )
        answer = self._take(out, size)
        try:
            if status != _OK:
                raise MalformedReadSet(answer.decode(errors="replace")[:500])
            return ReadSet.parse(orjson.loads(answer))
        except (MalformedReadSet, orjson.JSONDecodeError) as exc:
            return ReadSet((), (), (), (), (f"the policy could not be analysed: {exc}",))

    def close(self) -> None:
        self.lib.whose_opa_close(self.handle)

    def _take(self, out: Any, size: ctypes.c_size_t) -> bytes:
        """The library's answer as bytes, its buffer freed."""
        if not out:
            return b""
        try:
            return ctypes.string_at(out, size.value)
        finally:
            self.lib.whose_opa_free(out)


def analyse_bundle(library: Path, bundle: Path) -> tuple[str, ReadSet]:
    """The revision of a bundle made by make_bundle, and what its disclosure decision
    reads (for the local OPA server, which loads the same bundle)."""
    engine = _Engine(library, bundle)
    try:
        return engine.revision, engine.read_set(DISCLOSURE_RULE.encode())
    finally:
        engine.close()


class LinkedOpa(PolicyEngine):
    """The policy engine's questions, evaluated by OPA linked into this process."""

    url = "linked:"

    def __init__(
        self,
        library: Path,
        policy_dir: Path,
        bundle_dir: Path,
        timeout_s: float,
        confined: bool = False,
    ) -> None:
        self.library = library
        # A candidate policy's engine: no network, no environment (_Engine).
        self.confined = confined
        self.policy_dir = policy_dir
        self.bundle_dir = bundle_dir
        self._timeout_s = timeout_s
        self._timeout_ns = int(timeout_s * 1e9)
        self._engine: _Engine | None = None
        self._read_set: ReadSet | None = None
        # Whether the bundle's roots cover data.whose (they do for the bundle made from
        # the policy directory): only then does its revision name what decided.
        self._owns_policy = False
        self._calls = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def start(self) -> None:
        if not self.library.exists():
            raise OpaStartError(
                f"OPA library not found at {self.library}; run `make install` "
                "(or WHOSE_LOCAL_OPA=server for the OPA server)"
            )
        if not self.policy_dir.is_dir():
            raise OpaStartError(f"policy directory not found at {self.policy_dir}")
        await asyncio.to_thread(make_bundle, self.policy_dir, self.bundle_dir)
        engine = await asyncio.to_thread(_Engine, self.library, self.bundle_dir, self.confined)
        self._owns_policy = any(root.strip("/") in ("", POLICY_ROOT) for root in engine.roots)
        self._read_set = await asyncio.to_thread(engine.read_set, DISCLOSURE_RULE.encode())
        self._engine = engine
        log.info("OPA linked in: %s as bundle revision %s", self.policy_dir, engine.revision)

    async def close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            # A call in a worker thread still uses it: close once none is left.
            await self._idle.wait()
            engine.close()

    async def ready(self) -> bool:
        return self._engine is not None

    def standing_revision(self) -> str | None:
        """The loaded bundle's revision: it cannot change while the engine is open (a
        changed policy takes a restart), so a request that finds every decision in the
        cache under it need not ask the evaluator to confirm it."""
        engine = self._engine
        return engine.revision if engine is not None and self._owns_policy else None

    def read_set(self) -> tuple[str, ReadSet] | None:
        engine, read_set = self._engine, self._read_set
        if engine is None or read_set is None or not self._owns_policy:
            return None
        return engine.revision, read_set

    async def _query(self, rule: str, input_: dict[str, Any]) -> OpaAnswer:
        status, out, _ = await self._eval(rule, input_, rule)
        if status == _UNDEFINED:
            # An undefined rule (missing policy, wrong package): deny.
            raise PolicyUnavailable("OPA returned no result")
        revision = self._require_engine().revision if self._owns_policy else None
        # No decision log to join here: the id names this evaluation in the audit log.
        return OpaAnswer(_loads(out), str(uuid.uuid4()), revision or None)

    async def _value(self, rule: str) -> Any:
        status, out, _ = await self._eval(rule, {}, rule)
        return None if status == _UNDEFINED else _loads(out)

    async def compile(self, query: str, input_: dict[str, Any], unknowns: list[str]) -> Any:
        engine = self._require_engine()
        request = orjson.dumps({"query": query, "input": input_, "unknowns": unknowns})
        status, out = await self._call("compile", engine.compile, request, self._timeout_ns)
        if status == _REFUSED:
            raise Untranslatable(
                f"OPA's compiler refused the query: {out.decode(errors='replace')}"
            )
        if status != _OK:
            raise PolicyUnavailable(f"OPA's compiler failed: {out.decode(errors='replace')}")
        return _loads(out)

    async def eval_seconds(
        self, question: DisclosureQuestion, records: list[dict[str, Any]]
    ) -> float:
        _, _, spent_ns = await self._eval(DISCLOSURE_RULE, question.input(records), "bench")
        return spent_ns / 1e9

    async def _eval(self, rule: str, input_: dict[str, Any], label: str) -> tuple[int, bytes, int]:
        engine = self._require_engine()
        status, out, spent = await self._call(
            label, engine.eval, rule.encode(), orjson.dumps(input_), self._timeout_ns
        )
        if status not in (_OK, _UNDEFINED):
            raise PolicyUnavailable(f"OPA evaluation failed: {out.decode(errors='replace')[:500]}")
        return status, out, spent

    async def _call(self, label: str, call: Any, *args: Any) -> Any:
        """One call into the library in a worker thread (the event loop goes on), timed
        under `label` (whose_policy_call_seconds).

        OPA cancels a query at its deadline; the wait is bounded here as well, for work
        OPA cannot cancel midway (one long builtin call): the request then fails closed
        at once, and the thread finishes in the background (close() waits for it).
        """
        started = time.perf_counter()
        self._calls += 1
        self._idle.clear()
        future = asyncio.get_running_loop().run_in_executor(None, call, *args)
        future.add_done_callback(self._returned)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self._timeout_s + _GRACE_S)
        except TimeoutError as exc:
            raise PolicyUnavailable("OPA evaluation passed its deadline") from exc
        finally:
            metrics.POLICY_SECONDS.labels(label).observe(time.perf_counter() - started)

    def _returned(self, future: asyncio.Future[Any]) -> None:
        self._calls -= 1
        if not self._calls:
            self._idle.set()
        if not future.cancelled():
            future.exception()  # marked as seen: a call given up on may still fail later

    def _require_engine(self) -> _Engine:
        if self._engine is None:
            raise PolicyUnavailable("policy client is not started")
        return self._engine


def _loads(out: bytes) -> Any:
    try:
        return orjson.loads(out)
    except orjson.JSONDecodeError as exc:
        raise PolicyUnavailable("OPA answered unparseable JSON") from exc
