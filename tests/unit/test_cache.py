"""Decision cache keys: everything that can change a decision changes the key."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sidecar.auth.identity import Identity
from sidecar.policy.cache import Keys, LocalCache
from sidecar.policy.contract import Decision, DisclosureQuestion

NOW = datetime(2026, 11, 30, 12, 0, 1, tzinfo=UTC)
QUESTION = DisclosureQuestion(Identity("bob", "acme", groups=("g",)), ["carol"], "recall", NOW)
RECORD: dict[str, Any] = {
    "id": "r1",
    "tenant": "acme",
    "content": "the launch is October 17",
    "audience": ["group:launch-team"],
    "valid_at": "2026-10-01T00:00:00Z",
}


def key(
    question: DisclosureQuestion = QUESTION,
    record: dict[str, Any] = RECORD,
    revision: str = "whose@r1",
) -> str | None:
    return Keys(question, revision, bucket_s=5).key(record)


def test_same_question_same_record_same_key() -> None:
    assert key() is not None
    assert key() == key()


@pytest.mark.parametrize(
    "changed",
    [
        {"revision": "whose@r2"},
        {"question": dataclasses.replace(QUESTION, asker=Identity("carol", "acme", groups=("g",)))},
        {"question": dataclasses.replace(QUESTION, asker=Identity("bob", "globex", groups=("g",)))},
        {"question": dataclasses.replace(QUESTION, asker=Identity("bob", "acme"))},
        {
            "question": dataclasses.replace(
                QUESTION, asker=Identity("bob", "acme", ("g",), ("auditor",))
            )
        },
        {
            "question": dataclasses.replace(
                QUESTION, asker=Identity("bob", "acme", ("g",), (), ("s",))
            )
        },
        {"question": dataclasses.replace(QUESTION, audience=["carol", "dave"])},
        {"question": dataclasses.replace(QUESTION, purpose="get")},
        {"question": dataclasses.replace(QUESTION, as_of=NOW - timedelta(days=1))},
        {"question": dataclasses.replace(QUESTION, now=NOW + timedelta(seconds=5))},
        {"record": RECORD | {"id": "r2"}},
        {"record": RECORD | {"audience": ["bob"]}},
        {"record": RECORD | {"access_scope": "launch-core"}},
        {"record": RECORD | {"superseded_by": "r9", "invalid_at": "2026-11-01T00:00:00Z"}},
    ],
    ids=lambda c: next(iter(c)),
)
def test_anything_the_decision_depends_on_changes_the_key(changed: dict[str, object]) -> None:
    assert key(**changed) != key()  # type: ignore[arg-type]


def test_content_the_policy_never_reads_does_not_change_the_key() -> None:
    assert key(record=RECORD | {"content": "something else"}) == key()


def test_audience_order_does_not_matter() -> None:
    assert key(dataclasses.replace(QUESTION, audience=["carol", "carol"])) == key()


@pytest.mark.parametrize(
    "field",
    ["valid_at", "invalid_at"],
)
def test_no_caching_across_a_time_boundary_inside_the_bucket(field: str) -> None:
    inside = (NOW + timedelta(seconds=2)).isoformat()
    assert key(record=RECORD | {field: inside}) is None


def test_evidence_times_are_boundaries_too() -> None:
    evidence = [{"kind": "ack", "at": NOW.isoformat()}]
    assert key(record=RECORD | {"evidence": evidence}) is None


def test_every_time_the_policy_sets_against_now_keeps_its_boundary_check() -> None:
    # A time the cache does not know, which the policy compares with the instant asked
    # about (policy/readset.py `compared`): inside the bucket, no caching either.
    inside = RECORD | {"expires_at": (NOW + timedelta(seconds=2)).isoformat()}
    assert Keys(QUESTION, "whose@r1", bucket_s=5).key(inside) is not None
    assert Keys(QUESTION, "whose@r1", bucket_s=5, times=(("expires_at",),)).key(inside) is None
    # Known times keep theirs whatever the policy is found to read.
    valid = RECORD | {"valid_at": (NOW + timedelta(seconds=2)).isoformat()}
    assert Keys(QUESTION, "whose@r1", bucket_s=5, times=(("expires_at",),)).key(valid) is None


def test_a_time_a_shape_holds_by_its_side_is_no_boundary_for_the_shapes_key() -> None:
    # policy/shape.py replaces each of the policy's instants by its side of `now`, so a
    # shape's key turns when such a time's side does; a time kept exact (or a record
    # keyed by its whole view) keeps the check.
    inside = (NOW + timedelta(seconds=2)).isoformat()
    keys = Keys(QUESTION, "whose@r1", bucket_s=5, sided=(("valid_at",),))
    valid = RECORD | {"valid_at": inside}
    assert keys.cacheable(valid, shaped=True)
    assert not keys.cacheable(valid)
    assert not keys.cacheable(RECORD | {"invalid_at": inside}, shaped=True)
    assert not keys.cacheable(RECORD | {"valid_at": "soon"}, shaped=False)


def test_buckets_of_another_length_starting_alike_are_other_keys() -> None:
    # Replicas sharing Redis with different WHOSE_CACHE_BUCKET_S: a 10 s bucket's entry
    # was checked against its own edges, not a 5 s one's (found by a review).
    assert Keys(QUESTION, "whose@r1", bucket_s=5).bucket_start == (
        Keys(QUESTION, "whose@r1", bucket_s=10).bucket_start
    )
    assert Keys(QUESTION, "whose@r1", bucket_s=5).key(RECORD) != (
        Keys(QUESTION, "whose@r1", bucket_s=10).key(RECORD)
    )


def test_an_unreadable_time_is_never_cached() -> None:
    assert key(record=RECORD | {"valid_at": "soon"}) is None


async def test_local_cache_is_bounded() -> None:
    cache = LocalCache(2, ttl_s=60)
    await cache.set_many({"a": b"1", "b": b"2", "c": b"3"}, 60)
    assert sum(v is not None for v in await cache.get_many(["a", "b", "c"])) == 2


async def test_size_zero_turns_the_local_cache_off() -> None:
    cache = LocalCache(0, ttl_s=60)
    await cache.set_many({"a": b"1"}, 60)
    assert await cache.get_many(["a"]) == [None]


def test_policies_read_time_from_input_only() -> None:
    # The cache keys on input.now's bucket; a rule reading the clock would escape it.
    rego = Path(__file__).resolve().parents[2] / "rego"
    offenders = [p for p in rego.rglob("*.rego") if "time.now_ns" in p.read_text()]
    assert offenders == []


def test_a_decision_is_a_value() -> None:
    # One cached decision is shared by every record of a shape and every request that
    # reads its entry (policy/decider.py `_entry`): nothing may change it in place.
    decision = Decision(allow=True, usable_as="belief")
    with pytest.raises(ValidationError):
        decision.allow = False  # type: ignore[misc]
