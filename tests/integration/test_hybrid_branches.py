"""A hybrid recall's two rankings draw only from what the asker may see.

With the policy's filter not narrowing the store's search to what the asker may see
(WHOSE_PUSHDOWN=false here; a denial outside `visible_to` is the same case), records
the asker may not see are candidates of the search. A hybrid search fuses a dense and a
lexical ranking: were each ranking the store's best over everything the filter admits,
hidden records near the query in either ranking would push a record the asker may see
out of both, and the fused answer would lose it while enough lesser records the asker
may see came back to end the over-fetch (issue 35). Each ranking is found among
disclosable records alone, then fused (reads/reader.py `_fused`).

The world, on both store backends, with a real OPA: what Bob may see, asked about
"launch"; Bob's answer; then records only Alice may see, near the query in each
ranking; Bob's answer again, which must be the same, item for item and score for score.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.auth.identity import Identity
from sidecar.policy.contract import DisclosureQuestion
from sidecar.store.scope import Scope
from sidecar.writes.versions import WrittenPoint
from tests.integration.conftest import BACKENDS
from tests.integration.lifecycle import DIM, Core, core, own_opa

__all__ = ["own_opa"]

ALICE, BOB = Identity("alice", "acme"), Identity("bob", "acme")


def towards(cosine: float, axis: int) -> list[float]:
    """A unit vector at `cosine` to the query (axis 0), the rest along `axis`."""
    vector = [0.0] * DIM
    vector[0] = cosine
    vector[axis] = math.sqrt(max(0.0, 1 - cosine**2))
    return vector


QUERY = towards(1.0, 1)


@pytest.fixture(params=BACKENDS)
async def world(
    request: pytest.FixtureRequest, tmp_path: Path, own_opa: str
) -> AsyncIterator[Core]:
    async with core(request.param, tmp_path, own_opa, request, pushdown=False) as c:
        yield c


async def put(world: Core, content: str, vector: list[float], audience: list[str]) -> None:
    payload = {"content": content, "audience": audience, "source": "notes"}
    await world.versions.upsert(
        ALICE, [WrittenPoint(uuid.uuid4(), vector, payload)], "proxy.upsert"
    )


async def bobs_answer(world: Core) -> list[tuple[str, float]]:
    question = DisclosureQuestion(BOB, [], "recall", world.clock())
    answer = await world.reader.nearest(
        question, "test", QUERY, Scope(tenant="acme"), 3, text="launch", adaptive=False
    )
    return [(s.record.id, round(s.record.score or 0.0, 5)) for s in answer.shown]


async def test_hidden_records_in_either_ranking_change_nothing_bob_is_shown(
    world: Core,
) -> None:
    # Bob may see: a note on the launch fairly near the query (the best of both
    # rankings fused), and three notes nearer the query without the word.
    await put(world, "the launch", towards(0.8, 2), ["alice", "bob"])
    for n in range(3):
        await put(world, f"unrelated note {n}", towards(0.9, 3), ["alice", "bob"])
    before = await bobs_answer(world)
    assert len(before) == 3
    # Alice's alone: nearer the query than Bob's launch note, and more about the launch.
    for n in range(40):
        await put(world, f"other thing {n}", towards(0.85, 4), ["alice"])
        await put(world, "launch launch launch launch", towards(-1.0, 5), ["alice"])
    assert await bobs_answer(world) == before
