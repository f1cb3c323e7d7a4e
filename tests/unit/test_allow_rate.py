"""Sizing recall's first round from the asker's recent allow rate."""

from __future__ import annotations

import pytest

from sidecar.reads.allow_rate import ALPHA, LocalAllowRates, first_batch, updated


@pytest.mark.parametrize(
    ("limit", "rate", "expected"),
    [
        (10, None, 40),  # nothing known yet: limit * the configured factor
        (10, 1.0, 12),  # reads everything it is shown: two spare, not 1.5 * limit
        (10, 0.98, 13),
        (10, 0.5, 27),  # 20 expected, 10 of them denied: half as many again, and two
        (10, 0.1, 147),  # one in ten: wide enough to finish in one round, usually
        (10, 0.0, 752),  # the floor keeps a zero rate from asking for everything
        (10, 0.001, 752),
        (100, 0.01, 1000),  # the candidate cap
        (10, 5.0, 10),  # never fewer than limit
    ],
)
def test_first_batch(limit: int, rate: float | None, expected: int) -> None:
    assert first_batch(limit, rate, default_factor=4, cap=1000) == expected


def test_ewma_starts_at_the_first_observation_then_moves_by_alpha() -> None:
    assert updated(None, 1, 10) == pytest.approx(0.1)
    assert updated(0.1, 10, 10) == pytest.approx(0.1 + ALPHA * 0.9)


async def test_local_rates_learn_per_key_and_ignore_empty_requests() -> None:
    rates = LocalAllowRates()
    await rates.observe("bob", 0, 0)
    assert await rates.get("bob") is None
    await rates.observe("bob", 4, 40)
    await rates.observe("alice", 36, 40)
    assert await rates.get("bob") == pytest.approx(0.1)
    assert await rates.get("alice") == pytest.approx(0.9)
