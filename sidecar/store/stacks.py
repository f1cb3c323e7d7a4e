"""Stack collections: a RAG stack's own collections, each a record collection of its
tenant with the stack's own vectors (store/layout.py), on either backend.

Each (tenant, name) is one physical Qdrant collection (docs/design.md, "Stack
collections"), named by a hash of the tenant and the name, so two tenants can each
have a `kb`, and no physical name says whose it is or what the tenant called it:
`whose_stack_<tenant hash>_<collection hash>` (the first part lets one tenant's
collections be listed without reading anyone else's). What a collection is (tenant,
name, layout, creator, created) is recorded with it: on the embedded backend in a JSON
file beside its shard (`<data_dir>/store/stacks/<physical>.json`, the shard in
`<physical>/`), on a Qdrant server in the collection's metadata. Both survive a restart:
the files are read when the registry opens; the server is asked each time, so every
replica of a sidecar sees a collection another created or dropped.

The points are whose records (`Stored` payloads, written by writes/writer.py over
`store(tenant, name)`), so every perspective rule holds for them as in the whose
collection; only the vectors are the stack's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models as qm

from sidecar.errors import CollectionExists, CollectionRefused, QueryMissing
from sidecar.store import Search, Store
from sidecar.store.edge import EdgeStore
from sidecar.store.layout import VectorLayout
from sidecar.store.schema import OWN_METADATA
from sidecar.store.server import Layout, ServerStore
from sidecar.store.vectors import LAYOUT_KEY

log = logging.getLogger(__name__)

PREFIX = "whose_stack_"
# Where the embedded backend's record keeps the stack's own indexes.
INDEXES_KEY = "indexes"
# Where the server keeps what a collection is, beside its layout (LAYOUT_KEY).
STACK_KEY = "whose_stack"
# Qdrant's own rule for a collection name (lib/storage validate_collection_name).
MAX_NAME_CHARS = 255
FORBIDDEN_CHARS = frozenset('<>:"/\\|?*\0\x1f')
# The index types a stack may ask for on its own metadata (geo is not filterable here).
OWN_INDEX_TYPES = frozenset(
    {
        qm.PayloadSchemaType.KEYWORD,
        qm.PayloadSchemaType.INTEGER,
        qm.PayloadSchemaType.FLOAT,
        qm.PayloadSchemaType.BOOL,
        qm.PayloadSchemaType.DATETIME,
        qm.PayloadSchemaType.UUID,
        qm.PayloadSchemaType.TEXT,
    }
)


@dataclass(frozen=True)
class StackInfo:
    """What a stack collection is: whose, its name, its vectors, who made it, when."""

    tenant: str
    name: str
    layout: VectorLayout
    creator: str
    created: datetime
    # The stack's own payload indexes (`create_index`): stored path (under
    # OWN_METADATA) and type, sorted. On the embedded backend they are in the record;
    # on a server, the collection's own payload schema says them.
    indexes: tuple[tuple[str, qm.PayloadSchemaType], ...] = ()

    @property
    def physical(self) -> str:
        return physical_name(self.tenant, self.name)

    @property
    def own_indexes(self) -> dict[str, qm.PayloadSchemaType]:
        return dict(self.indexes)

    def as_json(self) -> dict[str, Any]:
        """The record (the layout is kept beside it, under LAYOUT_KEY)."""
        return {
            "tenant": self.tenant,
            "name": self.name,
            "creator": self.creator,
            "created": self.created.isoformat(),
        }

    @classmethod
    def from_json(cls, raw: Any, layout: Any) -> StackInfo | None:
        parsed = VectorLayout.from_json(layout)
        if not isinstance(raw, dict) or parsed is None:
            return None
        try:
            created = datetime.fromisoformat(str(raw["created"]))
            return cls(str(raw["tenant"]), str(raw["name"]), parsed, str(raw["creator"]), created)
        except (KeyError, TypeError, ValueError):
            return None

    def with_indexes(self, indexes: Any) -> StackInfo:
        """This collection with the own indexes of a schema (path: type), the paths
        under OWN_METADATA of a type a stack may ask for; anything else left out."""
        own: list[tuple[str, qm.PayloadSchemaType]] = []
        for path, kind in (indexes or {}).items() if isinstance(indexes, dict) else ():
            try:
                parsed = qm.PayloadSchemaType(kind)
            except ValueError:
                continue
            own_path = isinstance(path, str) and path.startswith(OWN_METADATA)
            if own_path and parsed in OWN_INDEX_TYPES:
                own.append((path, parsed))
        return replace(self, indexes=tuple(sorted(own)))


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def tenant_prefix(tenant: str) -> str:
    return f"{PREFIX}{_digest('tenant', tenant)[:16]}_"


def physical_name(tenant: str, name: str) -> str:
    """The Qdrant collection (or shard folder) of a tenant's stack collection."""
    return tenant_prefix(tenant) + _digest("collection", tenant, name)[:32]


def check_name(name: str) -> None:
    """Qdrant's rule for a collection name, refused in its words."""
    if not 1 <= len(name) <= MAX_NAME_CHARS:
        raise CollectionRefused(
            "collection_name",
            f"Collection name must be between 1 and {MAX_NAME_CHARS} characters long",
        )
    bad = sorted(FORBIDDEN_CHARS & set(name))
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise CollectionRefused(
            "collection_name", f"Collection name cannot contain the characters {shown}"
        )


def exists(name: str) -> CollectionExists:
    """A name the caller's tenant uses already, in Qdrant's words (409)."""
    return CollectionExists(f"Wrong input: Collection `{name}` already exists!", ["exists"])


def missing(name: str) -> QueryMissing:
    """A collection the caller's tenant does not have, in Qdrant's words (404)."""
    return QueryMissing("collection", f"Not found: Collection `{name}` doesn't exist!")


class _Backend(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def record(self, info: StackInfo) -> bool:
        """Create the collection and its record; False if its name is taken."""
        ...

    async def get(self, tenant: str, name: str) -> StackInfo | None: ...

    async def listed(self, tenant: str) -> list[StackInfo]: ...

    async def every(self) -> list[StackInfo]:
        """Every tenant's collections (the retention sweep walks them)."""
        ...

    def store(self, info: StackInfo) -> Store:
        """The collection's store, not yet opened."""
        ...

    async def remove(self, info: StackInfo, opened: Store | None) -> bool:
        """Close `opened` (if any), then remove the collection and its record; False if
        there was none."""
        ...

    async def reindexed(self, info: StackInfo) -> None:
        """Record `info`'s own indexes (made on its store already)."""
        ...


class StackCollections:
    """The registry of stack collections, per tenant, on one backend (`edge`,
    `server`): create, get, list, drop, and each one's store, opened on first use and
    kept (one per physical collection) until dropped or `close`d."""

    def __init__(
        self, backend: _Backend, max_collections: int = 64, reserved: Collection[str] = ()
    ) -> None:
        """`max_collections`: per tenant (WHOSE_MAX_COLLECTIONS). `reserved`: names
        every tenant has already (the whose collection's): creating one answers as
        an existing collection."""
        self.backend = backend
        self.max_collections = max_collections
        self.reserved = frozenset(reserved)
        self._stores: dict[str, Store] = {}
        # Creating, opening and dropping, one at a time (an embedded shard may be
        # opened once only; the bound is checked and the collection made together).
        self._lock = asyncio.Lock()

    @classmethod
    def edge(
        cls,
        root: Path,
        *,
        max_collections: int = 64,
        reserved: Collection[str] = (),
        search: Search | None = None,
        optimize_interval_s: float = 10.0,
        quiet_for: Callable[[], float] | None = None,
    ) -> StackCollections:
        """Shards under `root` (`<data_dir>/store/stacks`)."""
        backend = _Edge(root, search, optimize_interval_s, quiet_for)
        return cls(backend, max_collections, reserved)

    @classmethod
    def server(
        cls,
        clients: list[AsyncQdrantClient],
        *,
        max_collections: int = 64,
        reserved: Collection[str] = (),
        layout: Layout | None = None,
        retries: int = 2,
        search: Search | None = None,
    ) -> StackCollections:
        """Collections on the Qdrant server (or cluster) of `clients`, each spread as
        `layout` says, as the whose collection is; the registry closes the clients."""
        backend = _Server(clients, layout or Layout(), retries, search)
        return cls(backend, max_collections, reserved)

    async def open(self) -> None:
        await self.backend.open()

    async def close(self) -> None:
        async with self._lock:
            stores, self._stores = list(self._stores.values()), {}
            for store in stores:
                await store.close()
            await self.backend.close()

    async def create(self, tenant: str, name: str, layout: VectorLayout, creator: str) -> StackInfo:
        """A new empty collection `name` of `tenant` (CollectionExists if the tenant has
        one; CollectionRefused for a name Qdrant would refuse, or one too many)."""
        check_name(name)
        if name in self.reserved:
            raise exists(name)
        info = StackInfo(tenant, name, layout, creator, datetime.now(UTC))
        async with self._lock:
            if await self.backend.get(tenant, name) is not None:
                raise exists(name)
            if len(await self.backend.listed(tenant)) >= self.max_collections:
                raise CollectionRefused(
                    "too_many_collections",
                    f"a tenant may have at most {self.max_collections} collections"
                    " (WHOSE_MAX_COLLECTIONS): delete one first",
                )
            if not await self.backend.record(info):
                raise exists(name)
        return info

    async def get(self, tenant: str, name: str) -> StackInfo | None:
        """The tenant's collection `name`, or None."""
        if name in self.reserved or not _valid(name):
            return None
        return await self.backend.get(tenant, name)

    async def every(self) -> list[StackInfo]:
        """Every tenant's collections, by tenant and name."""
        return sorted(await self.backend.every(), key=lambda i: (i.tenant, i.name))

    async def names(self, tenant: str) -> list[str]:
        """The names of the tenant's collections, sorted."""
        return sorted(info.name for info in await self.backend.listed(tenant))

    async def store(self, tenant: str, name: str) -> Store:
        """The store of the tenant's collection `name` (QueryMissing, Qdrant's 404
        words, when there is none), opened on first use."""
        info = await self.get(tenant, name)
        if info is None:
            raise missing(name)
        async with self._lock:
            opened = self._stores.get(info.physical)
            if opened is None:
                opened = self.backend.store(info)
                await opened.open()
                self._stores[info.physical] = opened
            return opened

    async def create_index(
        self, tenant: str, name: str, path: str, kind: qm.PayloadSchemaType
    ) -> StackInfo:
        """A payload index of the stack's own on `path` (under OWN_METADATA), made on
        the collection's store and recorded with it (QueryMissing if the tenant has no
        such collection)."""
        store = await self.store(tenant, name)
        await store.create_index(path, kind)
        return await self._reindex(tenant, name, {path: kind})

    async def drop_index(self, tenant: str, name: str, path: str) -> StackInfo:
        """The stack's own index on `path` removed (none: nothing changes)."""
        store = await self.store(tenant, name)
        await store.drop_index(path)
        return await self._reindex(tenant, name, {path: None})

    async def _reindex(
        self, tenant: str, name: str, changed: dict[str, qm.PayloadSchemaType | None]
    ) -> StackInfo:
        async with self._lock:
            info = await self.backend.get(tenant, name)
            if info is None:
                raise missing(name)
            indexes: dict[str, Any] = {p: k.value for p, k in info.indexes}
            for path, kind in changed.items():
                if kind is None:
                    indexes.pop(path, None)
                else:
                    indexes[path] = kind.value
            info = info.with_indexes(indexes)
            await self.backend.reindexed(info)
            return info

    async def drop(self, tenant: str, name: str) -> bool:
        """Remove the tenant's collection `name`, points and all (closing its store);
        False if there was none."""
        if name in self.reserved or not _valid(name):
            return False
        async with self._lock:
            info = await self.backend.get(tenant, name)
            if info is None:
                return False
            opened = self._stores.pop(info.physical, None)
            return await self.backend.remove(info, opened)


def _valid(name: str) -> bool:
    try:
        check_name(name)
    except CollectionRefused:
        return False
    return True


# --- the embedded engine -------------------------------------------------------------


class _Edge:
    """A shard folder per collection under `root`, its record in a JSON file beside it.
    One process holds the data directory, so the records are read once, at open."""

    def __init__(
        self,
        root: Path,
        search: Search | None,
        optimize_interval_s: float,
        quiet_for: Callable[[], float] | None,
    ) -> None:
        self.root = root
        self.search = search
        self.optimize_interval_s = optimize_interval_s
        self.quiet_for = quiet_for
        self._known: dict[str, StackInfo] = {}

    async def open(self) -> None:
        self._known = await asyncio.to_thread(self._read_all)

    def _read_all(self) -> dict[str, StackInfo]:
        known: dict[str, StackInfo] = {}
        if not self.root.exists():
            return known
        for path in sorted(self.root.glob(f"{PREFIX}*.json")):
            try:
                raw = json.loads(path.read_text())
            except (OSError, ValueError):
                raw = None
            info = StackInfo.from_json(raw, raw.get(LAYOUT_KEY) if isinstance(raw, dict) else None)
            if info is None or f"{info.physical}.json" != path.name:
                log.warning("%s is not a stack collection's record: left out", path)
                continue
            assert isinstance(raw, dict)
            info = info.with_indexes(raw.get(INDEXES_KEY))
            known[info.physical] = info
        return known

    async def close(self) -> None:
        self._known = {}

    async def get(self, tenant: str, name: str) -> StackInfo | None:
        info = self._known.get(physical_name(tenant, name))
        return info if info is not None and (info.tenant, info.name) == (tenant, name) else None

    async def listed(self, tenant: str) -> list[StackInfo]:
        return [i for i in self._known.values() if i.tenant == tenant]

    async def every(self) -> list[StackInfo]:
        return list(self._known.values())

    async def record(self, info: StackInfo) -> bool:
        if info.physical in self._known:
            return False
        await asyncio.to_thread(self._write, info)
        self._known[info.physical] = info
        return True

    def _write(self, info: StackInfo) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        # A folder without a record is what a drop cut short left: not this collection's.
        shutil.rmtree(self.root / info.physical, ignore_errors=True)
        self._rewrite(info)

    def _rewrite(self, info: StackInfo) -> None:
        record = self.root / f"{info.physical}.json"
        written = record.with_suffix(".json.new")
        indexes = {path: kind.value for path, kind in info.indexes}
        written.write_text(
            json.dumps(info.as_json() | {LAYOUT_KEY: info.layout.as_json(), INDEXES_KEY: indexes})
        )
        os.replace(written, record)

    async def reindexed(self, info: StackInfo) -> None:
        if info.physical in self._known:
            await asyncio.to_thread(self._rewrite, info)
            self._known[info.physical] = info

    def store(self, info: StackInfo) -> Store:
        return EdgeStore(
            self.root / info.physical,
            0,
            self.optimize_interval_s,
            self.quiet_for,
            self.search,
            vectors=info.layout,
        )

    async def remove(self, info: StackInfo, opened: Store | None) -> bool:
        if self._known.pop(info.physical, None) is None:
            return False
        if opened is not None:
            await opened.close()
        await asyncio.to_thread(self._delete, info)
        return True

    def _delete(self, info: StackInfo) -> None:
        # The record first: a drop cut short leaves a folder no record names.
        (self.root / f"{info.physical}.json").unlink(missing_ok=True)
        shutil.rmtree(self.root / info.physical, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (self.root / f"{info.physical}.owner").unlink()


# --- a Qdrant server or cluster --------------------------------------------------------


class _Server:
    """A Qdrant collection per stack collection, its record in the collection's
    metadata; asked each time (other replicas create and drop too)."""

    def __init__(
        self,
        clients: list[AsyncQdrantClient],
        layout: Layout,
        retries: int,
        search: Search | None,
    ) -> None:
        self.clients = clients
        self.layout = layout
        self.retries = retries
        self.search = search

    def _store(self, physical: str, info: StackInfo | None = None) -> ServerStore:
        return ServerStore(
            self.clients,
            physical,
            0,
            self.layout,
            self.retries,
            self.search,
            vectors=info.layout if info is not None else None,
            metadata={STACK_KEY: info.as_json()} if info is not None else None,
            creates=False,
            owns_clients=False,
        )

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        for client in self.clients:
            await client.close()

    async def _read(self, physical: str) -> StackInfo | None:
        described = await self._store(physical).described()
        if described is None:
            return None
        metadata, indexes = described
        info = StackInfo.from_json(metadata.get(STACK_KEY), metadata.get(LAYOUT_KEY))
        return info.with_indexes(indexes) if info is not None else None

    async def reindexed(self, info: StackInfo) -> None:
        return None  # the collection's payload schema is the record

    async def get(self, tenant: str, name: str) -> StackInfo | None:
        info = await self._read(physical_name(tenant, name))
        return info if info is not None and (info.tenant, info.name) == (tenant, name) else None

    async def listed(self, tenant: str) -> list[StackInfo]:
        prefix = tenant_prefix(tenant)
        physical = [n for n in await self._store("").collections() if n.startswith(prefix)]
        found = await asyncio.gather(*(self._read(p) for p in physical))
        return [i for i in found if i is not None and i.tenant == tenant]

    async def every(self) -> list[StackInfo]:
        physical = [n for n in await self._store("").collections() if n.startswith(PREFIX)]
        found = await asyncio.gather(*(self._read(p) for p in physical))
        return [i for i in found if i is not None]

    async def record(self, info: StackInfo) -> bool:
        store = self._store(info.physical, info)
        return await store.create()

    def store(self, info: StackInfo) -> Store:
        return self._store(info.physical, info)

    async def remove(self, info: StackInfo, opened: Store | None) -> bool:
        if opened is not None:
            await opened.close()
        await self._store(info.physical, info).drop()
        return True
