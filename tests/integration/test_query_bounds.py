"""The query engine's refusals, bounds and documented differences, on a real store.

- Every bound (WHOSE_QUERY_*, WHOSE_FACET_*) refuses a request over it with its name
  as the reason, and before anything is asked of the store or the policy; so does
  every query kind whose does not serve (by name).
- Past its scan bound a facet (and a count) answers what the examined points hold and
  says it was truncated.
- A filter holds under `must` at every level: a root `should` and a prefetch's
  `should` are both required, where Qdrant 1.18.3 merges them into one `should`
  (qdrant/qdrant#10594) and answers points matching either.
- `with_vector` returns each point's vectors as Qdrant does.
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import QueryRefused, QueryTooCostly
from sidecar.http.qdrant.dialect import QDRANT
from sidecar.http.refusals import status_of
from sidecar.reads.query.plan import Bounds as QueryBounds
from sidecar.store import Store
from tests.conftest import POLICY_DIR
from tests.integration.conftest import backend
from tests.loops import own_loop
from tests.qdrant_server import QdrantNode
from tests.query_engine import DIM, TENANT, Ask, Plain, Whose, linked_policy, record, vector

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)


class Counted:
    """The real store, with a count of the calls that reach it (instrumentation, not
    a fake: every call is the store's own)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await attribute(*args, **kwargs)

        return counted


@dataclass
class Setup:
    loop: asyncio.AbstractEventLoop
    store: Counted
    whose: Whose
    plain: Plain
    ids: list[str]

    def ask(self, request: Ask, who: Whose | Plain | None = None) -> Any:
        return self.loop.run_until_complete((who or self.whose).ask(request))


@pytest.fixture(scope="module")
def setup(
    request: pytest.FixtureRequest,
    qdrant_server: QdrantNode,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Setup]:
    folder = Path(tmp_path_factory.mktemp("query-bounds"))
    with own_loop() as loop:
        rng = random.Random(5)
        items = [(record(rng, ["bob"]), vector(rng)) for _ in range(40)]
        store = backend("edge", folder, DIM, 300)
        policy = linked_policy(POLICY_DIR, folder)
        loop.run_until_complete(store.open())
        loop.run_until_complete(store.put(TENANT, [(p, {"": v}) for p, v in items]))
        loop.run_until_complete(policy.start())
        plain = loop.run_until_complete(Plain.create(qdrant_server.url, items))
        counted = Counted(store)
        whose = Whose.build(counted, policy, folder)
        try:
            yield Setup(loop, counted, whose, plain, [p["id"] for p, _ in items])
        finally:
            loop.run_until_complete(plain.drop())
            loop.run_until_complete(policy.close())
            loop.run_until_complete(store.close())
            shutil.rmtree(folder, ignore_errors=True)


Q = [0.1] * DIM


def _deep(depth: int) -> dict[str, Any]:
    body: dict[str, Any] = {"query": Q, "limit": 3}
    for _ in range(depth):
        body = {"prefetch": [body], "query": Q, "limit": 3}
    return body


OVER_A_BOUND = [
    ("prefetch_depth", Ask("query", _deep(5))),
    ("prefetches", Ask("query", {"prefetch": [{"query": Q}] * 17, "query": {"fusion": "rrf"}})),
    ("level_limit", Ask("query", {"prefetch": [{"query": Q, "limit": 1001}], "query": Q})),
    ("level_limit", Ask("query", {"query": {"nearest": Q, "mmr": {"candidates_limit": 1001}}})),
    ("limit", Ask("query", {"query": Q, "limit": 90, "offset": 11})),
    (
        "candidates",
        Ask(
            "query",
            {
                "prefetch": [{"query": Q, "limit": 1000}] * 6,
                "query": {"fusion": "rrf"},
                "limit": 10,
            },
        ),
    ),
    (
        "examples",
        Ask("query", {"query": {"recommend": {"positive": [Q] * 65}}}),
    ),
    ("batch", Ask("query_batch", {"searches": [{"query": Q}] * 17})),
    ("groups", Ask("query_groups", {"query": Q, "group_by": "observer_id", "limit": 101})),
    (
        "group_size",
        Ask("query_groups", {"query": Q, "group_by": "observer_id", "group_size": 101}),
    ),
    ("facet_limit", Ask("facet", {"key": "observer_id", "limit": 1001})),
]


@pytest.mark.parametrize(("bound", "ask"), OVER_A_BOUND, ids=[b for b, _ in OVER_A_BOUND])
def test_a_request_over_a_bound_is_refused_by_name_before_the_store_is_asked(
    setup: Setup, bound: str, ask: Ask
) -> None:
    before = setup.store.calls
    answer = setup.ask(ask)
    assert answer[0] == "refused", answer
    assert isinstance(setup.whose.error, QueryTooCostly)
    assert status_of(QDRANT, setup.whose.error) == 400
    assert setup.whose.error.reasons == [bound]
    assert setup.store.calls == before


NOT_SERVED = [
    ("formula", {"prefetch": [{"query": Q}], "query": {"formula": "$score"}}),
    ("sample", {"query": {"sample": "random"}}),
    (
        "relevance feedback",
        {
            "query": {
                "relevance_feedback": {
                    "target": Q,
                    "feedback": [],
                    "strategy": {"naive": {"a": 1, "b": 1, "c": 1}},
                }
            }
        },
    ),
    ("multivectors", {"query": [[0.1] * DIM, [0.2] * DIM]}),
    ("inference", {"query": {"text": "a document", "model": "some-model"}}),
    ("shard_key", {"query": Q, "shard_key": "eu"}),
]


@pytest.mark.parametrize(("what", "body"), NOT_SERVED, ids=[w for w, _ in NOT_SERVED])
def test_a_kind_whose_does_not_serve_is_refused_by_name(
    setup: Setup, what: str, body: dict[str, Any]
) -> None:
    before = setup.store.calls
    answer = setup.ask(Ask("query", body))
    assert answer[0] == "refused", answer
    error = setup.whose.error
    assert isinstance(error, QueryRefused)
    assert error.reasons == ["unsupported"]
    assert what.split()[0] in str(error)
    assert setup.store.calls == before


def test_past_its_scan_bound_a_facet_counts_what_it_examined_and_says_so(setup: Setup) -> None:
    small = Whose(setup.whose.store, setup.whose.gate, QueryBounds(max_facet_scan=10))
    whole = setup.ask(Ask("facet", {"key": "observer_id"}))
    assert sum(n for _, n in whole) == 40
    assert not setup.whose.truncated
    part = setup.ask(Ask("facet", {"key": "observer_id"}), small)
    assert small.truncated
    assert sum(n for _, n in part) == 10
    counted = setup.ask(
        Ask("count", {}), Whose(small.store, small.gate, QueryBounds(max_count_scan=7))
    )
    assert counted == 7


def test_a_filter_holds_at_every_level_where_qdrant_merges_should(setup: Setup) -> None:
    alice = {"key": "observer_id", "match": {"value": "alice"}}
    carol = {"key": "observer_id", "match": {"value": "carol"}}
    body = {
        "prefetch": [{"query": Q, "filter": {"should": [alice]}, "limit": 40}],
        "query": {"fusion": "rrf"},
        "filter": {"should": [carol]},
        "limit": 40,
    }
    # Both must hold, and no record has two holders.
    assert setup.ask(Ask("query", body)) == []
    # Qdrant 1.18.3 (qdrant/qdrant#10594): root and prefetch `should` merged into one.
    assert len(setup.ask(Ask("query", body), setup.plain)) > 0


def test_vectors_come_back_as_qdrant_returns_them(setup: Setup) -> None:
    body = {"query": Q, "limit": 5, "with_vector": True}
    ours = setup.loop.run_until_complete(_vectors(setup.whose, body))
    theirs = setup.loop.run_until_complete(_plain_vectors(setup.plain, body))
    assert ours.keys() == theirs.keys()
    for point, vectors in ours.items():
        assert vectors.keys() == theirs[point].keys() == {"", "lexical"}
        assert vectors[""] == pytest.approx(theirs[point][""], abs=1e-6)
        assert vectors["lexical"]["indices"] == theirs[point]["lexical"]["indices"]
        assert vectors["lexical"]["values"] == pytest.approx(theirs[point]["lexical"]["values"])


async def _vectors(whose: Whose, body: dict[str, Any]) -> dict[str, Any]:
    from qdrant_client.http import models as qm

    from sidecar.policy.contract import DisclosureQuestion
    from sidecar.reads.query import whose as whose_collection
    from sidecar.reads.query.engine import QueryEngine
    from sidecar.reads.reader import Reader
    from tests.query_engine import ASKER, COLLECTION, NOW

    reader = Reader(whose.store, whose.gate, whose.reader_bounds)
    question = DisclosureQuestion(asker=ASKER, audience=[], purpose="recall", now=NOW)
    async with whose_collection.opened(reader, question, "t", lambda f: f, COLLECTION, DIM) as c:

        async def lookup(name: str) -> None:
            return None

        answer = await QueryEngine(whose.bounds).query(
            c, qm.QueryRequest.model_validate(body), lookup
        )
    found: dict[str, Any] = {}
    for hit in answer.hits:
        sparse = hit.vectors["lexical"]
        assert isinstance(sparse, qm.SparseVector)
        found[str(hit.id)] = {
            "": hit.vectors[""],
            "lexical": {"indices": sparse.indices, "values": sparse.values},
        }
    return found


async def _plain_vectors(plain: Plain, body: dict[str, Any]) -> dict[str, Any]:
    import httpx

    async with httpx.AsyncClient(base_url=f"{plain.url}/collections/{plain.name}") as c:
        response = await c.post("/points/query", json=body)
    points = response.json()["result"]["points"]
    return {plain.records[str(p["id"])]: p["vector"] for p in points}


REFUSED_AS_BAD = [
    # A scroll offset is a point id the scroll returned, never an integer here.
    ("scroll", {"offset": 5, "limit": 3}),
    # A grouping filters on its key every round: it needs an index (content has a text one).
    ("query_groups", {"query": Q, "group_by": "content"}),
    ("query_groups", {"query": Q, "group_by": "no_such_field"}),
    # An order_by key needs a range index, a facet key a keyword, integer, uuid or bool one.
    ("query", {"query": {"order_by": "observer_id"}}),
    ("facet", {"key": "confidence"}),
]


@pytest.mark.parametrize(("route", "body"), REFUSED_AS_BAD)
def test_a_request_the_collection_cannot_run_as_asked_is_a_400_not_a_503(
    setup: Setup, route: str, body: dict[str, Any]
) -> None:
    before = setup.store.calls
    answer = setup.ask(Ask(route, body))
    assert answer[0] == "refused", answer
    assert isinstance(setup.whose.error, QueryRefused)
    assert status_of(QDRANT, setup.whose.error) == 400
    assert setup.whose.error.reasons == ["bad_request"]
    assert setup.store.calls == before


def test_with_lookup_finds_the_point_a_group_key_names_when_the_asker_may_see_it(
    setup: Setup,
) -> None:
    """Grouped by the records' own `id` field, each group's key names its point: the
    lookup (in this collection, by name) finds it; a key that is no point id, none."""
    from qdrant_client.http import models as qm

    from sidecar.policy.contract import DisclosureQuestion
    from sidecar.reads.query import whose as whose_collection
    from sidecar.reads.query.engine import QueryEngine
    from sidecar.reads.query.groups import query_groups
    from sidecar.reads.reader import Reader
    from tests.query_engine import ASKER, COLLECTION, NOW

    async def grouped(key: str) -> list[tuple[Any, Any]]:
        reader = Reader(setup.whose.store, setup.whose.gate, setup.whose.reader_bounds)
        question = DisclosureQuestion(asker=ASKER, audience=[], purpose="recall", now=NOW)
        async with whose_collection.opened(
            reader, question, "t", lambda f: f, COLLECTION, DIM
        ) as coll:

            async def lookup(name: str) -> None:
                return None

            body = {"query": Q, "group_by": key, "limit": 3, "with_lookup": COLLECTION}
            request = qm.QueryGroupsRequest.model_validate(body)
            answer = await query_groups(QueryEngine(setup.whose.bounds), coll, request, lookup)
        return [(g.key, g.lookup.id if g.lookup else None) for g in answer.groups]

    by_id = setup.loop.run_until_complete(grouped("id"))
    assert len(by_id) == 3
    assert all(key == found for key, found in by_id)
    by_holder = setup.loop.run_until_complete(grouped("observer_id"))
    assert by_holder
    assert all(found is None for _, found in by_holder)
