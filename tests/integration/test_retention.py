"""Retention on both store backends, with a real OPA and a controlled clock
(writes/retention.py): a record older than its rule's maximum age is erased, a
younger one and a held one are kept, a sweep is bounded and goes on where it
stopped, and the server's schedule runs it (an injected sleep: no waiting)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from sidecar.writes.retention import every
from tests.integration.lifecycle import Core, belief, own_opa, set_data, world

__all__ = ["own_opa", "world"]

DAY = timedelta(days=1)


async def sweep(world: Core, **bounds: int) -> tuple[int, int, int]:
    report = await world.sweeper.sweep(
        max_erased=bounds.get("max_erased", 100), max_examined=bounds.get("max_examined", 100)
    )
    return report.expired, report.erased, report.held


async def test_no_rule_keeps_everything(world: Core) -> None:
    await world.write("alice", belief("alice", "the launch is October 17", ["alice"]))
    world.clock.advance(days=3650)
    report = await world.sweeper.sweep(max_erased=10, max_examined=10)
    assert report.horizon_days is None
    assert len(await world.everything()) == 1


async def test_a_record_past_its_maximum_age_is_erased(world: Core, own_opa: str) -> None:
    set_data(own_opa, "config/retention", {"rules": [{"max_age_days": 30}]})
    [old] = await world.write("alice", belief("alice", "the launch is October 17", ["alice"]))
    world.clock.advance(days=29)
    assert await sweep(world) == (0, 0, 0)
    world.clock.advance(days=2)
    assert await sweep(world) == (1, 1, 0)
    assert await world.stored(old.id) == {}
    [entry] = await world.entries(purpose="erase")
    assert (entry.asker, entry.route) == ("whose.retention", "retention")
    assert [(w.id, w.outcome, w.reasons) for w in entry.written] == [
        (str(old.id), "erased", ["retention"])
    ]


async def test_the_shortest_covering_rule_and_a_legal_hold(world: Core, own_opa: str) -> None:
    rules = [{"max_age_days": 365}, {"modality": "observed", "max_age_days": 7}]
    set_data(own_opa, "config/retention", {"rules": rules})
    [kept] = await world.write("alice", belief("alice", "the launch is October 17", ["alice"]))
    perceived = belief(
        "alice",
        "the marble is in the box",
        ["alice"],
        modality="observed",
        source={"kind": "perception", "participants": ["alice"]},
        evidence=[{"kind": "witnessed", "by": "alice"}],
    )
    [seen] = await world.write("relay", perceived, roles=("extractor",))
    [held] = await world.write("relay", perceived.model_copy(), roles=("extractor",))
    set_data(own_opa, "holds", {"tenants": {"acme": {"records": [str(held.id)], "subjects": []}}})
    world.clock.advance(days=8)
    assert await sweep(world) == (1, 1, 1)
    assert set(await world.stored(kept.id, seen.id, held.id)) == {str(kept.id), str(held.id)}


async def test_a_sweep_is_bounded_and_goes_on_where_it_stopped(world: Core, own_opa: str) -> None:
    set_data(own_opa, "config/retention", {"rules": [{"max_age_days": 1}]})
    for i in range(5):
        await world.write("alice", belief("alice", f"note {i}", ["alice"]))
    world.clock.advance(days=2)
    first = await world.sweeper.sweep(max_erased=2, max_examined=100)
    assert (first.erased, first.stopped_by_bound) == (2, True)
    assert len(await world.everything()) == 3
    second = await world.sweeper.sweep(max_erased=100, max_examined=100)
    assert (second.erased, second.stopped_by_bound) == (3, False)
    assert await world.everything() == []


async def test_the_server_sweeps_on_its_schedule() -> None:
    ran: list[int] = []
    waited: list[float] = []

    async def job() -> None:
        ran.append(len(waited))

    async def sleep(seconds: float) -> None:
        waited.append(seconds)
        if len(waited) > 3:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await every(60.0, job, sleep)
    assert waited == [60.0] * 4
    assert ran == [1, 2, 3]
