"""Hybrid search on both store backends: the dense ranking and BM25 fused in one query.

What must hold whatever the weights: a record's score is a function of the record and
the query alone (no other stored record changes it: not another tenant's, not one the
scope leaves out, not one the scope admits, which may be one the policy then withholds);
so it is the same in every over-fetch round, whatever else a round returns; both
backends score alike; and what is indexed names whose claim it is, weighing what was
said above who said it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from sidecar.embed.hashing import HashingEmbedder
from sidecar.embed.indexed import indexed_text
from sidecar.store import Store
from sidecar.store.scope import AnyOf, Scope
from sidecar.store.server import ServerStore
from sidecar.store.vectors import LEXICAL, IndexMismatch
from tests.factories import record
from tests.integration.conftest import BACKENDS, backend
from tests.qdrant_server import QdrantNode

DIM = 64
embed = HashingEmbedder(DIM).embed


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = backend(request.param, tmp_path, DIM, optimize_interval_s=30, request=request)
    await opened.open()
    yield opened
    await opened.close()


def rec(tenant: str, text: str, holder: str = "caroline", **fields: Any) -> dict[str, Any]:
    said = {"source_id": "chat", "confidence": 0.9, "valid_at": "2023-05-08T13:56:00Z"}
    return record(text, tenant=tenant, holder=holder, proposition={"text": text}, **said | fields)


async def put(store: Store, *records: dict[str, Any]) -> None:
    by_tenant: dict[str, list[tuple[dict[str, Any], list[float]]]] = {}
    for r in records:
        by_tenant.setdefault(r["tenant"], []).append((r, embed(indexed_text(r))))
    for tenant, items in by_tenant.items():
        await store.put(tenant, [(p, {"": v}) for p, v in items])


def scores(found: list[Any]) -> dict[str, float]:
    return {r.payload["content"]: round(r.score, 4) for r in found}


OURS = [
    "I went to a support group yesterday",
    "the adoption agency called back about the interview",
    "my kids loved the pottery class",
    "we painted a sunset by the lake",
]


async def test_no_other_record_changes_a_records_score(store: Store) -> None:
    """Records of other tenants, records the scope leaves out, and records the scope
    admits (as it admits records the policy withholds when pushdown is off, or when a
    denial is not in `visible_to`) share the collection; if their words counted, adding
    them would change the scores, and so the order, an asker is shown."""
    query = "support group adoption"
    scope = Scope(tenant="acme")
    await put(store, *(rec("acme", t) for t in OURS))
    searches = {"lexical": None, "hybrid": embed(query)}
    before = {
        mode: scores(await store.search(vector, scope, 10, text=query))
        for mode, vector in searches.items()
    }
    assert len(before["lexical"]) == 2
    assert len(before["hybrid"]) == len(OURS)
    # "support", "group" and "adoption" everywhere: in another tenant, in acme under
    # another holder (then left out by the scope), and in acme within the scope.
    noise = [rec("globex", f"support group adoption {i}") for i in range(40)]
    noise += [rec("acme", f"support group {i}", holder="melanie") for i in range(40)]
    noise += [rec("acme", f"the adoption support group met {i}") for i in range(40)]
    await put(store, *noise)
    mine = Scope(tenant="acme", extra=(AnyOf("observer_id", ("caroline",)),))
    for within in (scope, mine):
        for mode, vector in searches.items():
            after = scores(await store.search(vector, within, 200, text=query))
            assert {t: after[t] for t in before[mode]} == before[mode], mode


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


async def test_what_was_said_weighs_more_than_who_said_it(store: Store) -> None:
    """The holder's name is a word of every record they hold: it tells their claim from
    another's with the same words, but does not outrank the words of what was said."""
    said = rec(
        "acme", "my kids loved the pottery class downtown on tuesday evening", holder="melanie"
    )
    chat = rec("acme", "how was your week?")
    same = rec("acme", "my kids loved the pottery class downtown on tuesday evening")
    await put(store, said, chat)
    scope = Scope(tenant="acme")
    query = "caroline pottery"
    for vector in (None, embed(query)):
        [best, *_] = await store.search(vector, scope, 2, text=query)
        assert best.id == said["id"], vector is None
    await put(store, same)
    for vector in (None, embed(query)):
        [best, *_] = await store.search(vector, scope, 3, text=query)
        assert best.id == same["id"], vector is None


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
    """The same vectors and the same query on both: the same scores, to float32 precision."""
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


@pytest.mark.parametrize("modifier", [qm.Modifier.IDF, None])
async def test_a_collection_made_by_hand_is_adopted_only_without_an_idf_modifier(
    modifier: qm.Modifier | None, request: pytest.FixtureRequest
) -> None:
    """An empty collection with the right vectors becomes the sidecar's; with an IDF
    modifier on the lexical vector Qdrant would weigh every term by the whole
    collection (other tenants' records, hidden ones): refused like any mismatch."""
    if "server" not in BACKENDS:
        pytest.skip("needs the server backend (WHOSE_TEST_BACKENDS)")
    node: QdrantNode = request.getfixturevalue("qdrant_server")
    name = f"test_{uuid.uuid4().hex[:12]}"
    client = AsyncQdrantClient(url=node.url, check_compatibility=False)
    try:
        await client.create_collection(
            name,
            vectors_config=qm.VectorParams(size=DIM, distance=qm.Distance.COSINE),
            sparse_vectors_config={LEXICAL: qm.SparseVectorParams(modifier=modifier)},
        )
    finally:
        await client.close()
    store = ServerStore.connect([node.url], name, DIM)
    try:
        if modifier is None:
            await store.open()
            await put(store, rec("acme", OURS[0]))
            [found] = await store.search(None, Scope(tenant="acme"), 1, text="support group")
            assert found.payload["content"] == OURS[0]
        else:
            with pytest.raises(IndexMismatch, match="records no embedding model"):
                await store.open()
    finally:
        await store.close()
