"""The composition root: what a request handler (HTTP or MCP) can reach, opened once
at start-up in order (OPA, store, Redis, audit) and closed in reverse."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from qdrant_client import AsyncQdrantClient
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from sidecar.audit.redis_sink import RedisSink
from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog
from sidecar.auth.tokens import Authenticator
from sidecar.embed import Embedder
from sidecar.embed.hashing import HashingEmbedder
from sidecar.embed.onnx import OnnxEmbedder
from sidecar.embed.remote import RemoteEmbedder
from sidecar.memory import Memory
from sidecar.oversight import Oversight
from sidecar.points import PointReads
from sidecar.policy.cache import DecisionCache, LocalCache, RedisCache
from sidecar.policy.candidate import Candidates
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.grants import FileGrants, Grants, RedisGrants
from sidecar.policy.linked_opa import LinkedOpa, analyse_bundle
from sidecar.policy.local_opa import LocalOpa
from sidecar.policy.opa import PolicyClient
from sidecar.policy.readset import ReadSet
from sidecar.reads.allow_rate import LocalAllowRates, RedisAllowRates
from sidecar.reads.gate import Gate
from sidecar.reads.query.engine import QueryEngine
from sidecar.reads.query.plan import Bounds as QueryBounds
from sidecar.reads.reader import Bounds, Reader
from sidecar.settings import Settings
from sidecar.stack_paths import Stacks
from sidecar.store import Search, Store, hybrid
from sidecar.store.edge import EdgeStore
from sidecar.store.measured import MeasuredStore
from sidecar.store.server import NEIGHBOURHOOD_ABOVE, Layout, ServerStore
from sidecar.store.stacks import StackCollections
from sidecar.store.vectors import IndexSpec
from sidecar.writes.eraser import Eraser
from sidecar.writes.erasure_requests import ErasureRequests, FileRequests, RedisRequests
from sidecar.writes.forget_rules import FileRules, RedisRules, Rules
from sidecar.writes.locks import ChainLocks, LocalLocks, RedisLocks
from sidecar.writes.membership import FileEvents, Membership, RedisEvents
from sidecar.writes.retention import Sweeper, every
from sidecar.writes.versions import Versions
from sidecar.writes.writer import Writer

log = logging.getLogger("whose")


@dataclass
class Services:
    settings: Settings
    store: Store
    policy: PolicyEngine
    gate: Gate
    audit: AuditLog
    redis: aioredis.Redis | None
    reader: Reader
    writer: Writer
    eraser: Eraser
    sweeper: Sweeper
    embedder: Embedder
    authenticate: Authenticator
    memory: Memory
    oversight: Oversight
    # The Qdrant dialect's reads: Qdrant's query API over disclosable points (points.py).
    points: PointReads
    # A RAG stack's own collections, per tenant (store/stacks.py), and each one's read
    # and write paths (stack_paths.py).
    stacks: Stacks


def query_bounds(settings: Settings) -> QueryBounds:
    """What one Qdrant query may ask (WHOSE_QUERY_*, WHOSE_FACET_*)."""
    return QueryBounds(
        max_depth=settings.query_max_depth,
        max_prefetches=settings.query_max_prefetches,
        max_level_limit=settings.query_max_level_limit,
        max_limit=settings.max_limit,
        max_candidates=settings.query_max_candidates,
        max_examples=settings.query_max_examples,
        max_batch=settings.query_max_batch,
        max_groups=settings.query_max_groups,
        max_group_size=settings.query_max_group_size,
        max_facet_limit=settings.facet_max_limit,
        max_facet_scan=settings.facet_max_scan,
        max_count_scan=settings.max_count_scan,
    )


def open_embedder(settings: Settings) -> Embedder:
    """The configured embedder, not yet loaded (ValueError for a configuration that
    names two, or a model without its name or dimension)."""
    if settings.embed_url and settings.embed_model_dir:
        raise ValueError("set WHOSE_EMBED_URL or WHOSE_EMBED_MODEL_DIR, not both")
    if settings.embed_url:
        if not settings.embed_model or settings.embed_dim is None:
            raise ValueError("WHOSE_EMBED_URL needs WHOSE_EMBED_MODEL and WHOSE_EMBED_DIM")
        key = settings.embed_api_key
        return RemoteEmbedder(
            settings.embed_url,
            settings.embed_model,
            settings.embed_dim,
            api_key=key.get_secret_value() if key else None,
            timeout_s=settings.embed_timeout_s,
            retries=settings.embed_retries,
            batch=settings.embed_batch,
        )
    if settings.embed_model_dir:
        return OnnxEmbedder(
            settings.embed_model_dir,
            settings.embed_model,
            settings.vector_size,
            batch=settings.embed_batch,
        )
    if settings.embed_model or settings.embed_dim is not None:
        raise ValueError("WHOSE_EMBED_MODEL and WHOSE_EMBED_DIM need WHOSE_EMBED_URL or _MODEL_DIR")
    return HashingEmbedder(settings.vector_size)


def index_spec(embedder: Embedder) -> IndexSpec:
    return IndexSpec(embedder.name, embedder.dim)


def open_store(
    settings: Settings,
    quiet_for: Callable[[], float] | None = None,
    index: IndexSpec | None = None,
) -> Store:
    """The configured store, not yet opened. `quiet_for`: seconds since the server last
    had a request in flight, so the embedded engine optimizes between requests.
    `index`: the vectors it holds (default: the configured embedder's)."""
    index = index or index_spec(open_embedder(settings))
    weight = settings.lexical_weight
    if weight is None:
        hashing = index.embedder == HashingEmbedder.name
        weight = hybrid.WEIGHT_WITH_HASHING if hashing else hybrid.WEIGHT_WITH_A_MODEL
    search = Search(
        settings.search_exact_below,
        settings.search_hnsw_ef,
        weight,
        neighbourhood=settings.search_neighbourhood,
        threads=settings.search_threads,
        unproven_exact_below=settings.search_unproven_exact_below,
        sieve=settings.search_sieve,
    )
    if settings.store == "server":
        # The sieve saves the engine's checks of each point, which a server makes on
        # its own side of a round trip that costs more than they do (planner.py).
        search = replace(search, neighbourhood_above=NEIGHBOURHOOD_ABOVE, sieve=False)
        return ServerStore.connect(
            _qdrant_urls(settings),
            settings.collection,
            settings.vector_size,
            api_key=_qdrant_key(settings),
            timeout_s=settings.qdrant_timeout_s,
            layout=_qdrant_layout(settings),
            retries=settings.qdrant_retries,
            search=search,
            index=index,
        )
    path = settings.data_dir / "store" / settings.collection
    return EdgeStore(
        path, settings.vector_size, settings.optimize_interval_s, quiet_for, search, index
    )


def _qdrant_urls(settings: Settings) -> list[str]:
    if not settings.qdrant_url:
        raise ValueError("WHOSE_STORE=server needs WHOSE_QDRANT_URL")
    if settings.qdrant_write_consistency > settings.qdrant_replication:
        raise ValueError("WHOSE_QDRANT_WRITE_CONSISTENCY exceeds WHOSE_QDRANT_REPLICATION")
    return [url.strip() for url in settings.qdrant_url.split(",") if url.strip()]


def _qdrant_key(settings: Settings) -> str | None:
    return settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None


def _qdrant_layout(settings: Settings) -> Layout:
    return Layout(
        settings.qdrant_shards, settings.qdrant_replication, settings.qdrant_write_consistency
    )


def open_stacks(
    settings: Settings, quiet_for: Callable[[], float] | None = None
) -> StackCollections:
    """The stack collections on the configured backend, not yet opened: shards under
    `<data_dir>/store/stacks`, or collections on the Qdrant server beside whose's own,
    spread as it is. Searched as the whose collection's dense vector is (exact below
    WHOSE_SEARCH_EXACT_BELOW); there is no lexical weight, nothing being fused."""
    search = Search(
        settings.search_exact_below,
        settings.search_hnsw_ef,
        neighbourhood=settings.search_neighbourhood,
        threads=settings.search_threads,
        unproven_exact_below=settings.search_unproven_exact_below,
    )
    reserved = [settings.collection]
    if settings.store == "server":
        clients = [
            AsyncQdrantClient(
                url=url,
                api_key=_qdrant_key(settings),
                timeout=settings.qdrant_timeout_s,
                check_compatibility=False,
            )
            for url in _qdrant_urls(settings)
        ]
        return StackCollections.server(
            clients,
            max_collections=settings.max_collections,
            reserved=reserved,
            layout=_qdrant_layout(settings),
            retries=settings.qdrant_retries,
            search=search,
        )
    return StackCollections.edge(
        settings.data_dir / "store" / "stacks",
        max_collections=settings.max_collections,
        reserved=reserved,
        search=search,
        optimize_interval_s=settings.optimize_interval_s,
        quiet_for=quiet_for,
    )


async def _start_policy(settings: Settings, stack: AsyncExitStack) -> PolicyEngine:
    policy: PolicyEngine
    if settings.opa_url:
        policy = PolicyClient(settings.opa_url, settings.opa_timeout_s)
    elif settings.local_opa == "linked":
        policy = LinkedOpa(
            settings.opa_library,
            settings.policy_dir,
            settings.data_dir / "opa-bundle",
            settings.opa_timeout_s,
        )
    else:
        opa = LocalOpa(
            settings.opa_binary,
            settings.policy_dir,
            settings.data_dir / "opa.log",
            settings.data_dir / "opa-bundle",
        )
        await opa.start()
        stack.push_async_callback(opa.stop)
        policy = PolicyClient(
            opa.url,
            settings.opa_timeout_s,
            unix_socket=str(opa.socket_path),
            read_set=await _analysed(settings, opa.bundle_dir),
        )
    await policy.start()
    stack.push_async_callback(policy.close)
    return policy


async def _analysed(settings: Settings, bundle: Path) -> tuple[str, ReadSet] | None:
    """What the local OPA server's policy reads (policy/readset.py), through the linked
    library that compiles the same bundle; None (no decision shared) without it."""
    if not settings.opa_library.exists():
        log.warning(
            "the OPA library is not at %s (`make install`): what the policy reads cannot be "
            "computed, so each record is decided alone",
            settings.opa_library,
        )
        return None
    return await asyncio.to_thread(analyse_bundle, settings.opa_library, bundle)


def candidates(settings: Settings) -> Candidates:
    """How a candidate policy is evaluated for impact analysis: by the kind of engine
    the sidecar runs; beside a deployment's own OPA server, linked in if the library is
    there, else by a local OPA server."""
    linked = settings.local_opa == "linked"
    if settings.opa_url:
        linked = settings.opa_library.exists()
    return Candidates(
        "linked" if linked else "server",
        settings.opa_library,
        settings.opa_binary,
        # A candidate is asked as the policy in force is, but never on a request's clock.
        max(settings.opa_timeout_s, 5.0),
        settings.data_dir / "candidates",
    )


@asynccontextmanager
async def open_redis(settings: Settings) -> AsyncIterator[aioredis.Redis | None]:
    """One client for locks, cache and audit; None on embedded defaults."""
    if not settings.redis_url:
        yield None
        return
    # Short socket timeouts: a hung Redis must cost a request little, never hang it.
    # A pooled connection left dead by a Redis restart fails its next command: retry
    # once at once (a fresh connection) on connection errors, never on timeouts.
    client = aioredis.from_url(
        settings.redis_url,
        socket_timeout=0.5,
        socket_connect_timeout=0.5,
        retry=Retry(NoBackoff(), retries=1, supported_errors=(RedisConnectionError,)),
    )
    try:
        yield client
    finally:
        await client.aclose()


def chain_locks(settings: Settings, redis: aioredis.Redis | None) -> ChainLocks:
    if redis is None:
        return LocalLocks()
    return RedisLocks(redis, settings.lock_ttl_s, settings.lock_wait_s)


def decision_cache(settings: Settings, redis: aioredis.Redis | None) -> DecisionCache:
    if redis is None:
        return LocalCache(settings.cache_size, ttl_s=2 * settings.cache_bucket_s)
    return RedisCache(redis)


def audit_log(settings: Settings, redis: aioredis.Redis | None) -> AuditLog:
    if redis is None:
        local = SqliteSink(settings.data_dir / "audit.sqlite3", settings.audit_max_entries)
        return AuditLog(local, None, settings.audit_queue)
    sink = RedisSink(redis, settings.audit_stream, settings.audit_maxlen)
    # Where entries wait while Redis is down: never rotated, bounded by its own setting.
    spill = settings.data_dir / "audit-spill.jsonl"
    return AuditLog(
        sink, spill, settings.audit_queue, spill_max_bytes=settings.audit_spill_max_bytes
    )


async def _in_background(stack: AsyncExitStack, work: Coroutine[Any, Any, None], name: str) -> None:
    """Work that runs as long as the services are open, cancelled when they close."""
    task = asyncio.create_task(work, name=name)

    async def stop() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    stack.push_async_callback(stop)


@asynccontextmanager
async def open_services(
    settings: Settings,
    authenticate: Authenticator,
    quiet_for: Callable[[], float] | None = None,
    *,
    background: bool = True,
) -> AsyncIterator[Services]:
    """Everything a request handler reaches, opened in order (OPA, store, Redis, audit)
    and closed in reverse: the API's lifespan and `whose mcp` over stdio share it.
    `background`: also run what goes on between requests (erasure requests left
    running, the retention sweep); off for one-shot commands (`whose sweep`)."""
    async with AsyncExitStack() as stack:
        embedder = open_embedder(settings)
        stack.push_async_callback(embedder.close)
        if isinstance(embedder, OnnxEmbedder):
            await asyncio.to_thread(embedder.load)
        policy = await _start_policy(settings, stack)
        store = MeasuredStore(open_store(settings, quiet_for, index_spec(embedder)))
        await store.open()
        stack.push_async_callback(store.close)
        stacks = open_stacks(settings, quiet_for)
        await stacks.open()
        stack.push_async_callback(stacks.close)
        redis = await stack.enter_async_context(open_redis(settings))
        audit = audit_log(settings, redis)
        await audit.start()
        stack.push_async_callback(audit.close)
        # One set of locks for every path that changes a chain (writes, erasures) or
        # counts before it adds (grants, forget rules, membership).
        locks = chain_locks(settings, redis)
        grants = Grants(
            RedisGrants(redis) if redis is not None else FileGrants(settings.data_dir / "grants"),
            policy,
            audit,
            locks,
            per_subject=settings.grants_per_subject,
        )
        gate = Gate(
            policy,
            decision_cache(settings, redis),
            audit,
            settings.cache_bucket_s,
            rates=RedisAllowRates(redis) if redis is not None else LocalAllowRates(),
            pushdown=settings.pushdown,
            shapes=settings.decide_shapes,
            grants=grants,
        )
        # Bookkeeping in flight (allow-rate updates) finishes before Redis closes.
        stack.push_async_callback(gate.idle)
        bounds = Bounds(
            settings.overfetch_factor,
            settings.max_rounds,
            settings.max_candidates,
            settings.max_count_scan,
        )
        reader = Reader(store, gate, bounds)
        # Standing forget rules stand in front of every writer, the stacks' too.
        rules = Rules(
            RedisRules(redis)
            if redis is not None
            else FileRules(settings.data_dir / "forget-rules"),
            policy,
            locks,
            audit,
            per_setter=settings.forget_rules_per_setter,
        )
        writer = Writer(store, policy, embedder, locks, audit, rules)
        eraser = Eraser(store, policy, locks, reader, audit)
        versions = Versions(store, reader, writer, eraser, locks)
        paths = Stacks(stacks, reader, policy, embedder, locks, audit, rules)
        erasures = ErasureRequests(
            store,
            policy,
            eraser,
            RedisRequests(redis)
            if redis is not None
            else FileRequests(settings.data_dir / "erasure-requests"),
            locks,
            step=settings.erasure_step,
            reader=reader,
            embedder=embedder,
        )
        rules.erasures = erasures
        sweeper = Sweeper(store, policy, eraser, locks)
        if background:
            await _in_background(stack, erasures.run(settings.erasure_poll_s), "whose-erasures")
            if settings.retention_interval_s > 0:

                async def sweep() -> None:
                    report = await sweeper.sweep(
                        max_erased=settings.retention_max_erased,
                        max_examined=settings.retention_max_examined,
                    )
                    # The stacks' own collections, within what the run has left.
                    await paths.sweep(
                        max_erased=settings.retention_max_erased - report.erased,
                        max_examined=settings.retention_max_examined - report.examined,
                    )

                loop = every(settings.retention_interval_s, sweep)
                await _in_background(stack, loop, "whose-retention")
        yield Services(
            settings=settings,
            store=store,
            policy=policy,
            gate=gate,
            audit=audit,
            redis=redis,
            reader=reader,
            writer=writer,
            eraser=eraser,
            sweeper=sweeper,
            embedder=embedder,
            authenticate=authenticate,
            memory=Memory(
                settings,
                reader,
                writer,
                embedder,
                eraser,
                versions,
                erasures,
                paths,
                grants,
                Membership(
                    RedisEvents(redis)
                    if redis is not None
                    else FileEvents(settings.data_dir / "conversations"),
                    policy,
                    locks,
                    audit,
                    max_events=settings.conversation_max_events,
                ),
                rules,
            ),
            oversight=Oversight(
                store,
                policy,
                audit,
                candidates(settings),
                None if settings.opa_url else settings.data_dir / "opa-bundle",
                grants,
            ),
            points=PointReads(
                reader,
                QueryEngine(query_bounds(settings)),
                settings.collection,
                settings.vector_size,
                versions,
                paths,
            ),
            stacks=paths,
        )
