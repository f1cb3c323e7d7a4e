"""A whose core on a real store and a real OPA of its own, for the lifecycle tests
(erasure, bulk requests, retention, stale derivations): the same parts
services.py composes, with a clock the test sets.

The OPA loads a copy of rego/ as plain files, so a test can change its data (legal
holds, retention rules, the erasure config) over OPA's REST API and the very next
decision uses it.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from sidecar.audit import AuditEntry, AuditQuery
from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.embed.hashing import HashingEmbedder
from sidecar.policy.cache import LocalCache
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.opa import PolicyClient
from sidecar.reads.gate import Gate
from sidecar.reads.reader import Bounds, Reader
from sidecar.record import MemoryRecord, MemoryWrite, Stored
from sidecar.store import Store
from sidecar.store.scope import Scope
from sidecar.writes.eraser import Eraser
from sidecar.writes.erasure_requests import ErasureRequests, FileRequests
from sidecar.writes.locks import LocalLocks
from sidecar.writes.retention import Sweeper
from sidecar.writes.versions import Versions
from sidecar.writes.writer import Writer
from tests.conftest import POLICY_DIR, start_opa, stop
from tests.integration.conftest import BACKENDS, backend

DIM = 32
embedder = HashingEmbedder(DIM)


@pytest.fixture(scope="module")
def own_opa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An OPA of this module's own, whose data the tests change."""
    folder = tmp_path_factory.mktemp("opa")
    policies = folder / "rego"
    shutil.copytree(POLICY_DIR, policies)
    url, process = start_opa(policies, folder / "opa.log")
    yield url
    stop(process)


def set_data(opa: str, path: str, value: Any) -> None:
    """Replace data.whose.<path> in the module's OPA (slash-separated)."""
    response = httpx.put(f"{opa}/v1/data/whose/{path}", json=value, timeout=10)
    assert response.status_code == 204, response.text


def original(path: str) -> Any:
    import json

    folder, _, rest = path.partition("/")
    document = json.loads((POLICY_DIR / "whose" / folder / "data.json").read_text())
    for part in filter(None, rest.split("/")):
        document = document[part]
    return document


@dataclass
class Clock:
    """The time the lifecycle sees: the real time until a test sets it (records are
    stamped with the real time when stored, writes/writer.py)."""

    fixed: datetime | None = None

    def __call__(self) -> datetime:
        return self.fixed or datetime.now(UTC)

    def set(self, at: datetime) -> None:
        self.fixed = at

    def advance(self, **delta: float) -> datetime:
        self.fixed = self() + timedelta(**delta)
        return self.fixed


@dataclass
class Core:
    store: Store
    policy: PolicyClient
    reader: Reader
    writer: Writer
    eraser: Eraser
    audit: AuditLog
    clock: Clock
    requests: ErasureRequests
    sweeper: Sweeper
    versions: Versions
    tenant: str = "acme"

    async def write(self, who: str, *bodies: MemoryWrite, **claims: Any) -> list[MemoryRecord]:
        identity = Identity(who, self.tenant, **claims)
        return await self.writer.write(list(bodies), identity, self.clock())

    async def stored(self, *ids: Any) -> dict[str, dict[str, Any]]:
        """What the store holds under these ids, read directly (no policy)."""
        found = await self.store.get(self.tenant, [uuid.UUID(str(i)) for i in ids])
        return {r.id: r.payload for r in found}

    async def everything(self) -> list[Stored]:
        return (await self.store.find(Scope(tenant=self.tenant), 10_000)).records

    async def seen_by(self, who: str, *ids: Any) -> dict[str, Any]:
        """What `who` is shown of these ids (the one read path), by id."""
        question = DisclosureQuestion(Identity(who, self.tenant), [], "get", self.clock())
        answer = await self.reader.by_ids(question, "test", [uuid.UUID(str(i)) for i in ids])
        return {s.record.id: s.item for s in answer.shown}

    async def entries(self, **query: Any) -> list[AuditEntry]:
        await self.audit.flushed()
        return await self.audit.query(AuditQuery(tenant=self.tenant, **query))


@asynccontextmanager
async def core(
    kind: str, folder: Path, opa: str, request: pytest.FixtureRequest, *, pushdown: bool = True
) -> AsyncIterator[Core]:
    store = backend(kind, folder, DIM, optimize_interval_s=3600, request=request)
    await store.open()
    policy = PolicyClient(opa, 5.0)
    await policy.start()
    audit = AuditLog(SqliteSink(folder / "audit.sqlite3"), None, queue_size=1000)
    await audit.start()
    clock = Clock()
    locks = LocalLocks()
    gate = Gate(policy, LocalCache(0, ttl_s=10), audit, bucket_s=5, pushdown=pushdown)
    reader = Reader(store, gate, Bounds(4, 4, 1000))
    writer = Writer(store, policy, embedder, locks, audit)
    eraser = Eraser(store, policy, locks, reader, audit, clock=clock)
    requests = ErasureRequests(
        store, policy, eraser, FileRequests(folder / "requests"), locks, step=2, clock=clock
    )
    sweeper = Sweeper(store, policy, eraser, locks, clock=clock)
    versions = Versions(store, reader, writer, eraser, locks, clock=clock)
    try:
        yield Core(store, policy, reader, writer, eraser, audit, clock, requests, sweeper, versions)
    finally:
        await gate.idle()
        await audit.close()
        await policy.close()
        await store.close()


@pytest.fixture(params=BACKENDS)
async def world(
    request: pytest.FixtureRequest, tmp_path: Path, own_opa: str
) -> AsyncIterator[Core]:
    """The lifecycle's parts on each backend, over the module's own OPA; whatever a
    test changed in that OPA's holds and config goes back afterwards."""
    async with core(request.param, tmp_path, own_opa, request) as c:
        yield c
    set_data(own_opa, "holds", original("holds"))
    set_data(own_opa, "config", original("config"))


def belief(holder: str, text: str, audience: list[str], **extra: Any) -> MemoryWrite:
    return MemoryWrite.model_validate(
        {
            "content": f"{holder} believes {text}",
            "proposition": {"text": text},
            "observer_id": holder,
            "source_id": f"{holder}-notes",
            "source": {"kind": "conversation", "speaker": holder},
            "modality": "believed",
            "audience": audience,
        }
        | extra
    )


def ids(*records: MemoryRecord) -> list[uuid.UUID]:
    """The stored ids of records a write answered with."""
    found = [r.id for r in records]
    assert all(i is not None for i in found)
    return [i for i in found if i is not None]
