"""The query engine's test world: records, stores, a real gate, and both ways to ask.

`Whose` is the engine (reads/query/) over today's whose collection on a real store
(either backend), its leaves decided by a real gate (OPA's evaluator linked in, the
shipped policy or a variant of it). `Plain` is the same points in a plain collection
of the real Qdrant server, asked directly over REST. Both take the same request
(`Ask`: a route and a Qdrant body) and answer in one normalised shape (`answer`),
ids as record ids.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from qdrant_client.http import models as qm

from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.embed.lexical import ENCODER
from sidecar.errors import WhoseError
from sidecar.http.qdrant.caller_filter import caller_filter
from sidecar.http.qdrant.dialect import QDRANT
from sidecar.http.refusals import status_of
from sidecar.policy.cache import LocalCache
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.linked_opa import LinkedOpa
from sidecar.reads.gate import Gate
from sidecar.reads.query import legacy, scans, whose
from sidecar.reads.query.engine import QueryEngine
from sidecar.reads.query.groups import query_groups
from sidecar.reads.query.plan import Bounds as QueryBounds
from sidecar.reads.reader import Bounds, Reader
from sidecar.store import Store
from sidecar.store.schema import point_id
from sidecar.store.vectors import lexical
from tests.conftest import OPA_LIBRARY

DIM = 8
TENANT = "acme"
ASKER = Identity("bob", TENANT)
COLLECTION = "whose_memories"
HOLDERS = ("alice", "carol", "dave")
MODALITIES = ("believed", "asserted", "reported_belief")
WORDS = [
    "launch",
    "date",
    "budget",
    "review",
    "october",
    "friday",
    "migration",
    "server",
    "team",
    "lunch",
    "party",
    "menu",
    "design",
    "pricing",
    "hiring",
    "roadmap",
    "incident",
    "outage",
    "customer",
    "contract",
]
NOW = datetime.now(UTC)


def record(rng: random.Random, audience: list[str], **fields: Any) -> dict[str, Any]:
    """A current record of one of HOLDERS (a payload as the store holds it)."""
    holder = rng.choice(HOLDERS)
    text = " ".join(rng.choices(WORDS, k=rng.randint(2, 9)))
    payload = {
        "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "tenant": TENANT,
        "content": text,
        "proposition": {"text": text, "key": f"k{rng.randint(0, 4)}"},
        "observer_id": holder,
        "modality": rng.choice(MODALITIES),
        "source_id": f"s{rng.randint(0, 3)}",
        "audience": sorted({holder, *audience}),
        "confidence": round(rng.uniform(0.5, 1.0), 6),
        "valid_at": (
            f"2025-{rng.randint(1, 9):02d}-{rng.randint(10, 28)}T{rng.randint(10, 23)}:00:00Z"
        ),
    }
    return payload | fields


def vector(rng: random.Random) -> list[float]:
    return [rng.gauss(0.0, 1.0) for _ in range(DIM)]


@dataclass(frozen=True)
class Ask:
    """One request: a route (the Qdrant REST route's name) and its body, ids in it as
    record ids; "<self>" names the collection asked."""

    route: str
    body: dict[str, Any]


Answer = Any


def _substitute(body: Any, ids: dict[str, str], collection: str) -> Any:
    if isinstance(body, dict):
        return {k: _substitute(v, ids, collection) for k, v in body.items()}
    if isinstance(body, list):
        return [_substitute(v, ids, collection) for v in body]
    if body == "<self>":
        return collection
    if isinstance(body, str) and body in ids:
        return ids[body]
    return body


def _refusal(status: int, message: str) -> Answer:
    return ("refused", status, message)


# --- Qdrant directly -------------------------------------------------------------------


@dataclass
class Plain:
    """A plain Qdrant collection holding the same points (point ids as whose's store
    makes them, so id order is the same)."""

    url: str
    name: str
    records: dict[str, str] = field(default_factory=dict)  # point id -> record id

    @classmethod
    async def create(cls, url: str, items: list[tuple[dict[str, Any], list[float]]]) -> Plain:
        plain = cls(url, f"plain_{uuid.uuid4().hex[:10]}")
        async with httpx.AsyncClient(base_url=f"{url}/collections/{plain.name}", timeout=30) as c:
            (
                await c.put(
                    "",
                    json={
                        "vectors": {"size": DIM, "distance": "Cosine"},
                        "sparse_vectors": {"lexical": {}},
                    },
                )
            ).raise_for_status()
            for key, schema in (
                ("tenant", "keyword"),
                ("observer_id", "keyword"),
                ("modality", "keyword"),
                ("source_id", "keyword"),
                ("audience", "keyword"),
                ("proposition.key", "keyword"),
                ("confidence", "float"),
                ("valid_at", "datetime"),
            ):
                response = await c.put(
                    "/index?wait=true", json={"field_name": key, "field_schema": schema}
                )
                response.raise_for_status()
            await plain.add(items, c)
        return plain

    async def add(
        self, items: list[tuple[dict[str, Any], list[float]]], client: httpx.AsyncClient
    ) -> None:
        points = []
        for payload, dense in items:
            pid = point_id(TENANT, payload["id"])
            self.records[pid] = payload["id"]
            sparse = lexical(payload)
            points.append(
                {
                    "id": pid,
                    "vector": {
                        "": dense,
                        "lexical": {"indices": sparse.indices, "values": sparse.values},
                    },
                    "payload": payload,
                }
            )
        (await client.put("/points?wait=true", json={"points": points})).raise_for_status()

    async def ask(self, request: Ask) -> Answer:
        ids = {rid: pid for pid, rid in self.records.items()}
        body = _substitute(request.body, ids, self.name)
        path = _PATHS[request.route]
        async with httpx.AsyncClient(
            base_url=f"{self.url}/collections/{self.name}", timeout=30
        ) as c:
            response = await c.post(path, json=body)
        if response.status_code != 200:
            return _refusal(response.status_code, response.json()["status"]["error"])
        return self._normalised(request.route, response.json()["result"])

    def _id(self, raw: Any) -> Any:
        return self.records.get(str(raw), raw)

    def _points(self, points: list[dict[str, Any]]) -> list[tuple[Any, float]]:
        return [(self._id(p["id"]), float(p.get("score") or 0.0)) for p in points]

    def _normalised(self, route: str, result: Any) -> Answer:
        match route:
            case "query":
                return self._points(result["points"])
            case "query_batch":
                return [self._points(r["points"]) for r in result]
            case "search" | "recommend" | "discover":
                return self._points(result)
            case "search_batch" | "recommend_batch" | "discover_batch":
                return [self._points(r) for r in result]
            case "query_groups" | "search_groups":
                return [(g["id"], self._points(g["hits"])) for g in result["groups"]]
            case "facet":
                return [(h["value"], h["count"]) for h in result["hits"]]
            case "count":
                return result["count"]
            case "scroll":
                nxt = result["next_page_offset"]
                return ([self._id(p["id"]) for p in result["points"]], nxt)
        raise AssertionError(route)

    async def drop(self) -> None:
        async with httpx.AsyncClient(timeout=30) as c:
            await c.delete(f"{self.url}/collections/{self.name}")


_PATHS = {
    "query": "/points/query",
    "query_batch": "/points/query/batch",
    "query_groups": "/points/query/groups",
    "search": "/points/search",
    "search_batch": "/points/search/batch",
    "search_groups": "/points/search/groups",
    "recommend": "/points/recommend",
    "recommend_batch": "/points/recommend/batch",
    "discover": "/points/discover",
    "discover_batch": "/points/discover/batch",
    "facet": "/facet",
    "count": "/points/count",
    "scroll": "/points/scroll",
}


# --- the engine over whose's collection --------------------------------------------------


def linked_policy(policy_dir: Path, folder: Path) -> LinkedOpa:
    return LinkedOpa(OPA_LIBRARY, policy_dir, folder / "opa-bundle", 10.0)


@dataclass
class Whose:
    """The engine over today's whose collection, as bob asks."""

    store: Store
    gate: Gate
    bounds: QueryBounds = field(default_factory=QueryBounds)
    reader_bounds: Bounds = field(default_factory=lambda: Bounds(4, 4, 1000))
    # Whether a bound stopped the last request short (reads/query/ `truncated`), and
    # the last request's refusal.
    truncated: bool = False
    error: WhoseError | None = None

    @classmethod
    def build(
        cls,
        store: Store,
        policy: LinkedOpa,
        folder: Path,
        *,
        pushdown: bool = True,
        bounds: QueryBounds | None = None,
    ) -> Whose:
        audit = AuditLog(SqliteSink(folder / f"audit-{uuid.uuid4().hex[:6]}.sqlite3"), None, 10_000)
        gate = Gate(policy, LocalCache(10_000, ttl_s=60), audit, bucket_s=5, pushdown=pushdown)
        return cls(store, gate, bounds or QueryBounds())

    async def ask(self, request: Ask) -> Answer:
        self.truncated, self.error = False, None
        try:
            return await self._ask(request)
        except WhoseError as exc:
            self.error = exc
            return _refusal(status_of(QDRANT, exc), str(exc))

    async def _ask(self, request: Ask) -> Answer:
        reader = Reader(self.store, self.gate, self.reader_bounds)
        engine = QueryEngine(self.bounds)
        body = _substitute(request.body, {}, COLLECTION)
        question = DisclosureQuestion(asker=ASKER, audience=[], purpose="recall", now=NOW)

        def check(flt: qm.Filter) -> qm.Filter:
            raw = flt.model_dump(mode="json", exclude_none=True, by_alias=True)
            checked = caller_filter(raw, TENANT)
            assert checked is not None
            return checked

        async with whose.opened(reader, question, request.route, check, COLLECTION, DIM) as coll:

            async def lookup(name: str) -> whose.WhoseCollection | None:
                return coll if name == COLLECTION else None

            route = request.route
            match route:
                case "query":
                    answer = await engine.query(coll, qm.QueryRequest.model_validate(body), lookup)
                    self.truncated = answer.truncated
                    return _hits(answer.hits)
                case "query_batch":
                    batch = qm.QueryRequestBatch.model_validate(body)
                    answers = await engine.query_batch(coll, batch.searches, lookup)
                    self.truncated = any(a.truncated for a in answers)
                    return [_hits(a.hits) for a in answers]
                case "query_groups" | "search_groups":
                    if route == "query_groups":
                        grouped_request = qm.QueryGroupsRequest.model_validate(body)
                    else:
                        grouped_request = legacy.search_groups(
                            legacy.SearchGroupsRequest.model_validate(body)
                        )
                    grouped = await query_groups(engine, coll, grouped_request, lookup)
                    self.truncated = grouped.truncated
                    return [(g.key, _hits(g.hits)) for g in grouped.groups]
                case "search" | "recommend" | "discover":
                    translated = _LEGACY[route](body)
                    answer = await engine.query(coll, translated, lookup)
                    self.truncated = answer.truncated
                    return _hits(answer.hits)
                case "search_batch" | "recommend_batch" | "discover_batch":
                    single = route.removesuffix("_batch")
                    requests = [_LEGACY[single](b) for b in body["searches"]]
                    answers = await engine.query_batch(coll, requests, lookup)
                    self.truncated = any(a.truncated for a in answers)
                    return [_hits(a.hits) for a in answers]
                case "facet":
                    faceted = await scans.facet(
                        coll, qm.FacetRequest.model_validate(body), self.bounds
                    )
                    self.truncated = faceted.truncated
                    return [(h.value, h.count) for h in faceted.hits]
                case "count":
                    counted = await scans.count(
                        coll, qm.CountRequest.model_validate(body), self.bounds
                    )
                    self.truncated = counted.truncated
                    return counted.count
                case "scroll":
                    page = await scans.scroll(
                        coll, qm.ScrollRequest.model_validate(body), self.bounds
                    )
                    self.truncated = page.truncated
                    return ([h.id for h in page.hits], page.next_offset)
        raise AssertionError(request.route)


def _hits(hits: list[Any]) -> list[tuple[Any, float]]:
    return [(h.id, float(h.score)) for h in hits]


_LEGACY: dict[str, Callable[[dict[str, Any]], qm.QueryRequest]] = {
    "search": lambda b: legacy.search(legacy.SearchRequest.model_validate(b)),
    "recommend": lambda b: legacy.recommend(legacy.RecommendRequest.model_validate(b)),
    "discover": lambda b: legacy.discover(legacy.DiscoverRequest.model_validate(b)),
}


def run(loop: asyncio.AbstractEventLoop, work: Awaitable[Any]) -> Any:
    return loop.run_until_complete(work)


def sparse_terms(items: list[tuple[dict[str, Any], list[float]]]) -> list[int]:
    """The lexical indices the stored records hold (what a sparse query can meet)."""
    return sorted({i for payload, _ in items for i in lexical(payload).indices})


def text_terms(text: str) -> list[int]:
    return ENCODER.query(text)


# --- requests of every kind, drawn -----------------------------------------------------

FILTER_KEYS = ("observer_id", "modality", "source_id")
GROUP_KEYS = ("observer_id", "modality", "source_id", "audience")
FACET_KEYS = ("observer_id", "modality", "source_id", "audience", "proposition.key")


@dataclass(frozen=True)
class Drawn:
    """A request, and how its answer is held to Qdrant's: `ties` (the same points and
    scores, in an order Qdrant's could also have among equal scores; `reference` is
    the same request asking Qdrant for every point, so a tie group cut by the limit
    is whole), or `exact`. `branches`: standalone queries of each fused branch, which
    must have no tie in their top (else the fusion's ranks are Qdrant's to choose)."""

    ask: Ask
    compare: str = "exact"
    reference: Ask | None = None
    offset: int = 0
    branches: tuple[Ask, ...] = ()


@dataclass(frozen=True)
class Pools:
    """What a drawn request may name: the points' ids, sparse terms, and ids no point
    the asker may see has (missing, or hidden)."""

    ids: tuple[str, ...]
    terms: tuple[int, ...]
    absent: tuple[str, ...] = ()


def _apart(branch: dict[str, Any] | None, root: dict[str, Any] | None) -> dict[str, Any] | None:
    """The branch's filter without conditions that Qdrant, merging the root's filter
    into each prefetch clause by clause, would then have in `must_not` and elsewhere at
    one level, where it ignores the `must_not` (see `a_filter`)."""
    if branch is None or root is None:
        return branch
    root_not = root.get("must_not", [])
    root_else = [*root.get("must", []), *root.get("should", [])]
    kept: dict[str, Any] = {}
    for clause, conditions in branch.items():
        against = root_else if clause == "must_not" else root_not
        remaining = [c for c in conditions if c not in against]
        if remaining:
            kept[clause] = remaining
    return kept or None


def _dense(seed: int) -> list[float]:
    return vector(random.Random(seed))


def strategies(pools: Pools, *, rank_ties: bool = True) -> Any:
    """Requests of every kind. `rank_ties` False: no grouping of an RRF fusion, whose
    tied ranks (two branches' firsts score alike) decide which points fill the first
    round, and so every later round: Qdrant's choice, not comparable up to ties."""
    from hypothesis import strategies as st

    seeds = st.integers(0, 2**31)
    dense = seeds.map(_dense)
    point = st.sampled_from(pools.ids)
    if pools.absent:
        point = st.one_of(point, point, point, point, st.sampled_from(pools.absent))

    @st.composite
    def sparse(draw: Any) -> dict[str, Any]:
        indices = draw(st.lists(st.sampled_from(pools.terms), min_size=1, max_size=3, unique=True))
        values = [draw(st.sampled_from([0.3, 0.55, 0.8, 1.0, 1.35, 1.9])) for _ in indices]
        return {"indices": indices, "values": values}

    @st.composite
    def condition(draw: Any) -> dict[str, Any]:
        kind = draw(st.sampled_from(["match", "any", "range", "has_id"]))
        if kind == "match":
            key = draw(st.sampled_from(FILTER_KEYS))
            value = draw(
                st.sampled_from(
                    {"observer_id": HOLDERS, "modality": MODALITIES}.get(key, ("s0", "s1", "s2"))
                )
            )
            return {"key": key, "match": {"value": value}}
        if kind == "any":
            return {
                "key": "observer_id",
                "match": {
                    "any": draw(
                        st.lists(st.sampled_from(HOLDERS), min_size=1, max_size=2, unique=True)
                    )
                },
            }
        if kind == "range":
            return {
                "key": "confidence",
                "range": {"gte": draw(st.sampled_from([0.55, 0.65, 0.75, 0.85]))},
            }
        return {"has_id": draw(st.lists(point, min_size=1, max_size=12, unique=True))}

    @st.composite
    def a_filter(draw: Any, should: bool = True) -> dict[str, Any] | None:
        if draw(st.booleans()):
            return None
        clauses = ["must", "must_not", *(["should"] if should else [])]
        built: dict[str, Any] = {}
        for clause in draw(st.lists(st.sampled_from(clauses), min_size=1, max_size=2, unique=True)):
            built[clause] = draw(st.lists(condition(), min_size=1, max_size=2))
        # Qdrant 1.18.3 ignores a `must_not` condition that is also in `must` or
        # `should` at the same level (it answers as if the `must_not` were not there);
        # whose's store filter nests the caller's, which the server then evaluates
        # right. Not drawn: Qdrant's own answer is wrong there.
        elsewhere = [*built.get("must", []), *built.get("should", [])]
        if "must_not" in built:
            built["must_not"] = [c for c in built["must_not"] if c not in elsewhere]
            if not built["must_not"]:
                del built["must_not"]
        if not built:
            return None
        return built

    def example() -> Any:
        return st.one_of(point, dense)

    @st.composite
    def vector_query(draw: Any) -> tuple[dict[str, Any], str]:
        """A leaf's query and the vector it uses."""
        kind = draw(
            st.sampled_from(
                ["nearest", "nearest", "sparse", "id", "recommend", "discover", "context"]
            )
        )
        if kind == "nearest":
            return {"query": draw(dense)}, ""
        if kind == "sparse":
            return {"query": draw(sparse()), "using": "lexical"}, "lexical"
        if kind == "id":
            return {"query": draw(point)}, ""
        if kind == "recommend":
            strategy = draw(st.sampled_from(["average_vector", "best_score", "sum_scores"]))
            positive = draw(st.lists(example(), min_size=1, max_size=3))
            negative = draw(st.lists(example(), max_size=2))
            return {
                "query": {
                    "recommend": {"positive": positive, "negative": negative, "strategy": strategy}
                }
            }, ""
        pairs = draw(
            st.lists(
                st.fixed_dictionaries({"positive": example(), "negative": example()}),
                min_size=1,
                max_size=2,
            )
        )
        if kind == "discover":
            return {"query": {"discover": {"target": draw(example()), "context": pairs}}}, ""
        return {"query": {"context": pairs}}, ""

    def _with(body: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return body | {k: v for k, v in fields.items() if v is not None}

    def _every(body: dict[str, Any], offset: int) -> dict[str, Any]:
        # Qdrant asked for every point from the start: a tie cut by the limit is whole.
        return {**body, "limit": 100, "offset": 0}

    @st.composite
    def plain_query(draw: Any) -> Drawn:
        leaf, _ = draw(vector_query())
        limit = draw(st.integers(1, 8))
        offset = draw(st.sampled_from([0, 0, 0, 2]))
        body = _with(
            leaf,
            limit=limit,
            offset=offset or None,
            filter=draw(a_filter()),
            score_threshold=draw(st.sampled_from([None, None, None, 0.1, 0.3])),
        )
        return Drawn(Ask("query", body), "ties", Ask("query", _every(body, offset)), offset)

    @st.composite
    def fused(draw: Any) -> Drawn:
        root_filter = draw(a_filter(should=False))
        branches, standalone = [], []
        for _ in range(draw(st.integers(2, 3))):
            leaf, _using = draw(
                st.one_of(
                    st.just(({"query": draw(dense)}, "")),
                    st.just(({"query": draw(sparse()), "using": "lexical"}, "lexical")),
                )
            )
            branch_limit = draw(st.integers(2, 8))
            branch_filter = _apart(draw(a_filter()), root_filter)
            prefetch = _with(leaf, limit=branch_limit, filter=branch_filter)
            branches.append(prefetch)
            both = [f for f in (root_filter, branch_filter) if f]
            standalone.append(
                Ask(
                    "query",
                    _with(leaf, limit=branch_limit + 1, filter={"must": both} if both else None),
                )
            )
        fusion = draw(
            st.sampled_from(
                [
                    {"fusion": "rrf"},
                    {"fusion": "dbsf"},
                    {"rrf": {"k": 5}},
                    {"rrf": {"weights": [1.0] * len(branches)}},
                ]
            )
        )
        if "weights" in fusion.get("rrf", {}):
            fusion = {
                "rrf": {"weights": [draw(st.sampled_from([0.5, 1.0, 3.0])) for _ in branches]}
            }
        limit = draw(st.integers(1, 10))
        offset = draw(st.sampled_from([0, 0, 1]))
        body = _with(
            {"prefetch": branches, "query": fusion},
            limit=limit,
            offset=offset or None,
            filter=root_filter,
        )
        return Drawn(
            Ask("query", body),
            "ties",
            Ask("query", _every(body, offset)),
            offset,
            tuple(standalone),
        )

    @st.composite
    def nested(draw: Any, depth: int = 0) -> dict[str, Any]:
        """A prefetch of dense branches (no ties), possibly nested."""
        if depth >= 1 or draw(st.booleans()):
            return _with(
                {"query": draw(dense)},
                limit=draw(st.integers(2, 8)),
                filter=draw(a_filter(should=False)),
            )
        inner = [draw(nested(depth + 1)) for _ in range(draw(st.integers(1, 2)))]
        # Not fusion: its ties would reach the parent as ranks Qdrant chooses.
        kind = draw(st.sampled_from(["nearest", "mmr", "order_by"]))
        query: Any = {
            "nearest": draw(dense),
            "rrf": {"fusion": "rrf"},
            "mmr": {
                "nearest": draw(dense),
                "mmr": {"diversity": draw(st.sampled_from([0.0, 0.3, 0.7]))},
            },
            "order_by": {
                "order_by": {
                    "key": "confidence",
                    "direction": draw(st.sampled_from(["asc", "desc"])),
                }
            },
        }[kind]
        return _with({"prefetch": inner, "query": query}, limit=draw(st.integers(2, 6)))

    @st.composite
    def rescored(draw: Any) -> Drawn:
        prefetches = [draw(nested()) for _ in range(draw(st.integers(1, 2)))]
        kind = draw(st.sampled_from(["nearest", "rrf", "order_by", "mmr"]))
        limit = draw(st.integers(1, 6))
        if kind == "nearest":
            body = {"prefetch": prefetches, "query": draw(dense), "limit": limit}
            return Drawn(Ask("query", body), "ties", Ask("query", _every(body, 0)))
        if kind == "rrf":
            body = {"prefetch": prefetches, "query": {"fusion": "rrf"}, "limit": limit}
            return Drawn(Ask("query", body), "ties", Ask("query", _every(body, 0)))
        if kind == "order_by":
            body = {"prefetch": prefetches, "query": {"order_by": "confidence"}, "limit": limit}
            return Drawn(Ask("query", body))
        mmr = {
            "diversity": draw(st.sampled_from([0.2, 0.5, 0.9])),
            "candidates_limit": draw(st.integers(2, 12)),
        }
        body = {
            "prefetch": prefetches,
            "query": {"nearest": draw(dense), "mmr": mmr},
            "limit": limit,
        }
        return Drawn(Ask("query", body))

    @st.composite
    def mmr(draw: Any) -> Drawn:
        mmr_params: dict[str, Any] = {"diversity": draw(st.sampled_from([0.0, 0.3, 0.5, 0.8, 1.0]))}
        if draw(st.booleans()):
            mmr_params["candidates_limit"] = draw(st.integers(1, 20))
        body = _with(
            {"query": {"nearest": draw(example()), "mmr": mmr_params}},
            limit=draw(st.integers(1, 8)),
            offset=draw(st.sampled_from([None, None, 1])),
            filter=draw(a_filter()),
        )
        return Drawn(Ask("query", body))

    @st.composite
    def ordered(draw: Any) -> Drawn:
        order: dict[str, Any] = {
            "key": "confidence",
            "direction": draw(st.sampled_from(["asc", "desc"])),
        }
        if draw(st.booleans()):
            order["start_from"] = draw(st.sampled_from([0.6, 0.7, 0.8]))
        body = _with(
            {"query": {"order_by": order}}, limit=draw(st.integers(1, 8)), filter=draw(a_filter())
        )
        return Drawn(Ask("query", body))

    @st.composite
    def scrolled_query(draw: Any) -> Drawn:
        body = _with(
            {},
            limit=draw(st.integers(1, 8)),
            offset=draw(st.sampled_from([None, 3])),
            filter=draw(a_filter()),
        )
        return Drawn(Ask("query", body))

    @st.composite
    def batch(draw: Any) -> Drawn:
        searches = [
            _with({"query": draw(dense)}, limit=draw(st.integers(1, 5)), filter=draw(a_filter()))
            for _ in range(draw(st.integers(1, 3)))
        ]
        return Drawn(Ask("query_batch", {"searches": searches}))

    fusions = ["rrf", "dbsf"] if rank_ties else ["dbsf"]

    @st.composite
    def grouped(draw: Any) -> Drawn:
        query = draw(
            st.one_of(
                dense.map(lambda v: {"query": v}),
                st.just(
                    {
                        "prefetch": [
                            {"query": draw(dense), "limit": 6},
                            {"query": draw(dense), "limit": 6},
                        ],
                        "query": {"fusion": draw(st.sampled_from(fusions))},
                    }
                ),
            )
        )
        body = _with(
            query,
            group_by=draw(st.sampled_from(GROUP_KEYS)),
            group_size=draw(st.integers(1, 3)),
            limit=draw(st.integers(1, 4)),
            filter=draw(a_filter(should=False)),
        )
        return Drawn(Ask("query_groups", body))

    @st.composite
    def search_grouped(draw: Any) -> Drawn:
        body = _with(
            {"vector": draw(dense)},
            group_by=draw(st.sampled_from(GROUP_KEYS)),
            group_size=draw(st.integers(1, 3)),
            limit=draw(st.integers(1, 4)),
            filter=draw(a_filter()),
        )
        return Drawn(Ask("search_groups", body))

    @st.composite
    def faceted(draw: Any) -> Drawn:
        body = _with(
            {"key": draw(st.sampled_from(FACET_KEYS))},
            limit=draw(st.sampled_from([None, 1, 2, 5])),
            filter=draw(a_filter()),
            exact=draw(st.sampled_from([None, True, False])),
        )
        return Drawn(Ask("facet", body))

    @st.composite
    def counted(draw: Any) -> Drawn:
        return Drawn(Ask("count", _with({"exact": True}, filter=draw(a_filter()))))

    @st.composite
    def scrolled(draw: Any) -> Drawn:
        body = _with({}, limit=draw(st.integers(1, 8)), filter=draw(a_filter()))
        if draw(st.booleans()):
            body["order_by"] = {
                "key": "confidence",
                "direction": draw(st.sampled_from(["asc", "desc"])),
            }
        return Drawn(Ask("scroll", body))

    @st.composite
    def legacy_search(draw: Any) -> Drawn:
        vector_struct = draw(
            st.one_of(
                dense,
                dense.map(lambda v: {"name": "", "vector": v}),
                sparse().map(lambda s: {"name": "lexical", "vector": s}),
            )
        )
        body = _with(
            {"vector": vector_struct},
            limit=draw(st.integers(1, 6)),
            offset=draw(st.sampled_from([None, 1])),
            filter=draw(a_filter()),
        )
        offset = body.get("offset") or 0
        return Drawn(
            Ask("search", body), "ties", Ask("search", {**body, "limit": 100, "offset": 0}), offset
        )

    @st.composite
    def legacy_recommend(draw: Any) -> Drawn:
        body = _with(
            {
                "positive": draw(st.lists(example(), min_size=1, max_size=2)),
                "negative": draw(st.lists(example(), max_size=2)),
            },
            strategy=draw(st.sampled_from([None, "average_vector", "best_score", "sum_scores"])),
            limit=draw(st.integers(1, 6)),
            filter=draw(a_filter()),
        )
        return Drawn(Ask("recommend", body), "ties", Ask("recommend", {**body, "limit": 100}))

    @st.composite
    def legacy_discover(draw: Any) -> Drawn:
        pairs = draw(
            st.lists(
                st.fixed_dictionaries({"positive": point, "negative": point}),
                min_size=1,
                max_size=2,
            )
        )
        body = _with(
            {"context": pairs},
            target=draw(st.one_of(st.none(), point)),
            limit=draw(st.integers(1, 6)),
        )
        return Drawn(Ask("discover", body), "ties", Ask("discover", {**body, "limit": 100}))

    @st.composite
    def legacy_batch(draw: Any) -> Drawn:
        searches = [
            {"vector": draw(dense), "limit": draw(st.integers(1, 4))}
            for _ in range(draw(st.integers(1, 3)))
        ]
        return Drawn(Ask("search_batch", {"searches": searches}))

    return st.one_of(
        plain_query(),
        fused(),
        fused(),
        rescored(),
        mmr(),
        ordered(),
        scrolled_query(),
        batch(),
        grouped(),
        search_grouped(),
        faceted(),
        counted(),
        scrolled(),
        legacy_search(),
        legacy_recommend(),
        legacy_discover(),
        legacy_batch(),
    )
