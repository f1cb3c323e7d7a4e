"""The bounds on what one person may add hold for requests sent at once.

A subject's grants (`WHOSE_GRANTS_PER_SUBJECT`), a setter's forget rules
(`WHOSE_FORGET_RULES_PER_SETTER`) and a writer's membership events in one conversation
(`WHOSE_CONVERSATION_MAX_EVENTS`) are counted, then added. Sent at once, each request
used to count without the others and all passed: one account, an unmodified client,
twelve requests, and the bound of three held eight. The count and the add now share a
lock per subject, setter or writer in a conversation (writes/locks.py): asyncio's in one process,
Redis's across replicas. Each bound is tried on one sidecar on the embedded defaults
and on two replicas sharing Redis, the requests spread over both.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import as_, start_sidecar, stop

AT_ONCE = 12
BOUND = 3


@pytest.fixture(params=["one sidecar", "two replicas on Redis"])
def bases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    env = {
        "WHOSE_GRANTS_PER_SUBJECT": str(BOUND),
        "WHOSE_FORGET_RULES_PER_SETTER": str(BOUND),
        "WHOSE_CONVERSATION_MAX_EVENTS": str(BOUND),
    }
    replicas = 1
    if request.param == "two replicas on Redis":
        # Each replica on an embedded store of its own: what is counted is kept in
        # Redis, not in the store.
        env["WHOSE_REDIS_URL"] = request.getfixturevalue("redis_url")
        replicas = 2
    started: list[Any] = []
    try:
        for n in range(replicas):
            started.append(start_sidecar(tmp_path / f"replica-{n}", env=env))
        yield [base for base, _ in started]
    finally:
        for _, process in started:
            stop(process)


def at_once(bases: list[str], path: str, bodies: list[dict[str, Any]], **who: Any) -> list[Any]:
    """POST each body at the same time, spread over the replicas: (status, body)."""

    async def send() -> list[httpx.Response]:
        clients = [httpx.AsyncClient(base_url=base, timeout=60) for base in bases]
        try:
            return await asyncio.gather(
                *(
                    clients[i % len(clients)].post(path, json=body, headers=as_(**who))
                    for i, body in enumerate(bodies)
                )
            )
        finally:
            for client in clients:
                await client.aclose()

    return [(r.status_code, r.json()) for r in asyncio.run(send())]


def accepted(answers: list[Any], refusal: Any) -> int:
    """How many were stored; every other one refused for the bound alone."""
    refused = [body for status, body in answers if status != 201]
    assert all(body.get("reasons") == refusal for body in refused), refused
    return len(answers) - len(refused)


def test_a_subjects_grants_given_at_once_stay_within_the_bound(bases: list[str]) -> None:
    bodies = [{"reader": f"reader-{n}", "categories": ["appointments"]} for n in range(AT_ONCE)]
    answers = at_once(bases, "/v1/grants", bodies, who="pat")
    assert accepted(answers, [f"grants_per_subject:{BOUND}: revoke one first"]) == BOUND
    with httpx.Client(base_url=bases[-1], timeout=60) as http:
        listed = http.get("/v1/grants", headers=as_("pat")).json()["grants"]
    assert len(listed) == BOUND


def test_a_setters_forget_rules_set_at_once_stay_within_the_bound(bases: list[str]) -> None:
    bodies = [{"kind": "value", "value": f"secret-{n}"} for n in range(AT_ONCE)]
    answers = at_once(bases, "/v1/forget-rules", bodies, who="bob")
    assert accepted(answers, [f"forget_rules_per_setter:{BOUND}: lift one first"]) == BOUND
    with httpx.Client(base_url=bases[-1], timeout=60) as http:
        listed = http.get("/v1/forget-rules", headers=as_("bob")).json()["rules"]
    assert len(listed) == BOUND


def test_a_writers_membership_events_recorded_at_once_stay_within_the_bound(
    bases: list[str],
) -> None:
    tenant = f"bounds-{uuid.uuid4().hex[:8]}"
    bodies = [
        {"changes": [{"person": f"guest-{n}", "change": "join", "at": "2026-03-01T10:00:00Z"}]}
        for n in range(AT_ONCE)
    ]
    answers = at_once(
        bases,
        "/v1/conversations/hall/membership",
        bodies,
        who="relay",
        tenant=tenant,
        roles="extractor",
    )
    assert accepted(answers, [f"at_most_{BOUND}_events"]) == BOUND
