"""Hybrid search on both store backends: the dense ranking and BM25 fused in one query.

What must hold whatever the weights: BM25's document frequencies come from the records
the search may return and from nothing else (another tenant's records, or records the
scope leaves out, change no score); a record's score is its own (the same in every
over-fetch round, whatever else a round returns); both backends score alike; and what
is indexed names whose claim it is.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.embed.hashing import HashingEmbedder
from sidecar.embed.indexed import indexed_text
from sidecar.store import Store
from sidecar.store.scope import AnyOf, Scope
from tests.integration.conftest import BACKENDS, backend

DIM = 64
embed = HashingEmbedder(DIM).embed


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = backend(request.param, tmp_path, DIM, optimize_interval_s=30, request=request)
    await opened.open()
    yield opened
    await opened.close()


def rec(tenant: str, text: str, holder: str = "caroline", **fields: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "tenant": tenant,
        "content": text,
        "proposition": {"text": text},
        "observer_id": holder,
        "modality": "asserted",
        "source_id": "chat",
        "audience": [holder],
        "confidence": 0.9,
        "valid_at": "2023-05-08T13:56:00Z",
    } | fields


async def put(store: Store, *records: dict[str, Any]) -> None:
    by_tenant: dict[str, list[tuple[dict[str, Any], list[float]]]] = {}
    for r in records:
        by_tenant.setdefault(r["tenant"], []).append((r, embed(indexed_text(r))))
    for tenant, items in by_tenant.items():
        await store.put(tenant, items)


def scores(found: list[Any]) -> dict[str, float]:
    return {r.payload["content"]: round(r.score, 4) for r in found}


OURS = [
    "I went to a support group yesterday",
    "the adoption agency called back about the interview",
    "my kids loved the pottery class",
    "we painted a sunset by the lake",
]


async def test_idf_counts_only_the_records_the_search_may_return(store: Store) -> None:
    """Other tenants' records, and this tenant's records outside the scope, share the
    collection; if their words counted, adding them would change the scores shown."""
    query = "support group adoption"
    scope = Scope(tenant="acme")
    await put(store, *(rec("acme", t) for t in OURS))
    before = {
        mode: scores(await store.search(vector, scope, 10, text=query))
        for mode, vector in (("lexical", None), ("hybrid", embed(query)))
    }
    # Elsewhere: "support" and "group" everywhere, in another tenant and out of scope.
    noise = [rec("globex", f"support group {i}") for i in range(40)]
    noise += [rec("acme", f"support group {i}", holder="melanie") for i in range(40)]
    await put(store, *noise)
    mine = Scope(tenant="acme", extra=(AnyOf("observer_id", ("caroline",)),))
    for mode, vector in (("lexical", None), ("hybrid", embed(query))):
        after = scores(await store.search(vector, mine, 10, text=query))
        assert after == before[mode], mode
    # And the scope's own records do count: the same search over all of acme differs.
    everyone = scores(await store.search(None, scope, 100, text=query))
    assert everyone[OURS[0]] != before["lexical"][OURS[0]]


async def test_a_records_score_is_its_own_in_every_round(store: Store) -> None:
    """The reader pages by excluding what it has seen: a record found in a later round
    must score as it would have in the first."""
    texts = [f"caroline talked about the {w} at the support group" for w in "abcdefgh"]
    texts += [f"melanie painted {w}" for w in "abcdefgh"]
    records = [rec("acme", t) for t in texts]
    await put(store, *records)
    scope = Scope(tenant="acme")
    query = "what did caroline say at the support group"
    vector = embed(query)
    whole = await store.search(vector, scope, 16, text=query)
    first = await store.search(vector, scope, 4, text=query)
    rest = await store.search(vector, scope, 12, exclude={r.id for r in first}, text=query)
    assert scores(first + rest) == scores(whole)


async def test_the_holder_and_the_day_are_indexed(store: Store) -> None:
    """ "What did Caroline say" finds Caroline's turn, not Melanie's with the same words;
    a month in words finds the claims of that month."""
    caroline = rec("acme", "I went to the lake")
    melanie = rec("acme", "I went to the lake", holder="melanie", valid_at="2023-08-02T10:00:00Z")
    await put(store, caroline, melanie)
    scope = Scope(tenant="acme")
    for query, expected in (("what did Caroline do?", "caroline"), ("August 2023", "melanie")):
        for vector in (None, embed(query)):
            [best, *_] = await store.search(vector, scope, 2, text=query)
            assert best.payload["observer_id"] == expected, (query, vector is None)


async def test_a_query_of_stop_words_alone_ranks_by_the_dense_vector(store: Store) -> None:
    await put(store, *(rec("acme", t) for t in OURS))
    scope = Scope(tenant="acme")
    query = "what was it"
    assert await store.search(None, scope, 10, text=query) == []
    hybrid = await store.search(embed(query), scope, 10, text=query)
    dense = await store.search(embed(query), scope, 10)
    assert scores(hybrid) == scores(dense)
    assert len(hybrid) == len(OURS)


async def test_both_backends_score_alike(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The server's weights (document frequencies the store counts) are the engine's own
    IDF modifier on the embedded backend: the same scores, to float32 precision."""
    if len(BACKENDS) < 2:
        pytest.skip("needs both backends (WHOSE_TEST_BACKENDS names one)")
    found: list[dict[str, float]] = []
    records = [rec("acme", t) for t in OURS] + [rec("acme", "support the team", holder="mel")]
    for kind in ("edge", "server"):
        store = backend(kind, tmp_path / kind, DIM, optimize_interval_s=30, request=request)
        await store.open()
        try:
            await put(store, *records)
            query = "caroline support group kids"
            lexical = await store.search(None, Scope(tenant="acme"), 10, text=query)
            hybrid = await store.search(embed(query), Scope(tenant="acme"), 10, text=query)
            found.append(scores(lexical) | {f"hybrid {k}": v for k, v in scores(hybrid).items()})
        finally:
            await store.close()
    edge, server = found
    assert edge.keys() == server.keys()
    for key, value in edge.items():
        assert server[key] == pytest.approx(value, abs=2e-3), key
