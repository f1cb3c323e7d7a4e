"""Focused two-world regressions: the leaks the noninterference property found, one each.

Each test builds a small world in store A and the same world plus hidden records
in store B (harness.check: same requests, same normalisation, same comparison as
the property), or, where it says so, asks one store two questions that must get
the same answer. Every one of them failed on main when written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from tests.conftest import as_
from tests.noninterference.harness import (
    Namer,
    Stores,
    body_of,
    check,
    counters,
)
from tests.noninterference.world import (
    BUILDER,
    BUILDER_ROLES,
    MISSING_ID,
    Asker,
    Case,
    Frag,
    Op,
    Rec,
    Ref,
    Resolver,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

JAN, FEB, MAR, FUTURE = (
    "2026-01-01T00:00:00Z",
    "2026-02-01T00:00:00Z",
    "2026-03-01T00:00:00Z",
    "2100-01-01T00:00:00Z",
)
HIDDEN = Ref("hidden", 0)


def alices(seed: int, audience: tuple[str, ...], valid_at: str, key: str = "k0") -> Rec:
    """Alice's belief on `key` (one chain: alice, k0)."""
    return Rec(
        seed=seed,
        holder="alice",
        key=key,
        value=seed,
        modality="believed",
        audience=audience,
        valid_at=valid_at,
    )


# --- 1. filters over version links ------------------------------------------------------

LINK_FILTERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "is_empty": lambda link: {"must": [{"is_empty": {"key": link}}]},
    "match.value (a guessed id)": lambda link: {
        "must": [{"key": link, "match": {"value": HIDDEN}}]
    },
    "match.text_any (hex fragments)": lambda link: {
        "must": [{"key": link, "match": {"text_any": Frag(HIDDEN, 5)}}]
    },
}
ROUTES: dict[str, Callable[[dict[str, Any]], Op]] = {
    "count": lambda flt: Op("count", {"filter": flt, "exact": True}),
    "scroll": lambda flt: Op("scroll", {"filter": flt, "limit": 2, "with_payload": False}),
    "query": lambda flt: Op(
        "query", {"vector_seed": 3, "filter": flt, "limit": 5, "with_payload": False}
    ),
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("condition", LINK_FILTERS)
def test_a_hidden_predecessor_is_not_found_through_supersedes(
    stores: Stores, condition: str, route: str
) -> None:
    """Bob may read Alice's v2 (alice, bob); its predecessor v1 (alice only) exists in
    B only. Bob's filters on `supersedes` answer as if v2 had been written alone."""
    v2 = alices(2, ("alice", "bob"), FEB)
    v1 = alices(1, ("alice",), JAN)
    op = ROUTES[route](LINK_FILTERS[condition]("supersedes"))
    check(stores, Case(Asker("bob"), (v2,), ((0, v1),), (op,)), all_stored=True)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("condition", LINK_FILTERS)
def test_a_hidden_successor_is_not_found_through_superseded_by(
    stores: Stores, condition: str, route: str
) -> None:
    """Bob may read Alice's v1 (alice, bob); a successor v2 (alice only, dated 2100, so
    v1 is still current) exists in B only. Bob's filters on `superseded_by` answer as
    if there were none. (Ids only: whether v1's own `invalid_at` may say that it will
    be replaced is a question of its own.)"""
    v1 = alices(1, ("alice", "bob"), JAN)
    v2 = alices(2, ("alice",), FUTURE)
    op = ROUTES[route](LINK_FILTERS[condition]("superseded_by"))
    check(stores, Case(Asker("bob"), (v1,), ((1, v2),), (op,)), all_stored=True)


# --- 2. a relay writing into a chain with a hidden head ------------------------------------

RELAY = Asker("scribe")  # role extractor (directory); may not read Alice's private belief
PRIVATE_HEAD = alices(1, ("alice",), FEB)  # store B only


def test_a_relay_observation_does_not_name_a_hidden_head(stores: Stores) -> None:
    """The relay gets 404 for Alice's private belief on k0, then writes what Alice
    said on k0 in front of Carol: the 201 bodies are the same (no hidden id in
    `supersedes`)."""
    observe = Op(
        "observe",
        {
            "speaker": "alice",
            "participants": ("carol",),
            "said_at": MAR,
            "claims": ((1001, "k0", 2, None, False),),
        },
    )
    check(
        stores,
        Case(RELAY, (), ((0, PRIVATE_HEAD),), (Op("get", {"ref": HIDDEN}), observe)),
        all_stored=True,
    )


def test_a_backdated_relay_batch_answers_alike(stores: Stores) -> None:
    """A batch dated before the hidden head (January, the head is February)."""
    batch = tuple(
        Rec(
            seed=1001 + k,
            holder="alice",
            key=key,
            value=k,
            modality="believed",
            audience=("alice", "carol"),
            valid_at=JAN,
        )
        for k, key in enumerate(("k0", "k1"))
    )
    write = Op("write", {"records": batch, "batch": True})
    check(stores, Case(RELAY, (), ((0, PRIVATE_HEAD),), (write,)), all_stored=True)


def test_naming_the_hidden_head_in_supersedes_answers_as_a_missing_id(stores: Stores) -> None:
    """Two worlds: `supersedes` = the hidden head's id (in A it names nothing)."""
    record = Rec(
        seed=1001,
        holder="alice",
        key="k0",
        value=2,
        modality="believed",
        audience=("alice", "carol"),
        valid_at=MAR,
        supersedes=HIDDEN,
    )
    write = Op("write", {"records": (record,), "batch": False})
    check(stores, Case(RELAY, (), ((0, PRIVATE_HEAD),), (write,)), all_stored=True)


def test_in_one_store_the_hidden_head_and_a_missing_id_answer_alike(stores: Stores) -> None:
    """One world (B): the relay names the hidden head, and (for another record) an id
    that exists nowhere; both answers must be the same refusal (or acceptance)."""
    tenant = stores.pool.take()
    http = stores.b.http
    builder = as_(BUILDER, tenant, roles=BUILDER_ROLES)
    head = http.post("/v1/memories", json=PRIVATE_HEAD.body(_no_refs()), headers=builder)
    assert head.status_code == 201, head.text
    relay = as_("scribe", tenant)
    answers = []
    for seed, named in ((1001, MISSING_ID), (1002, head.json()["records"][0]["id"])):
        body = Rec(
            seed=seed,
            holder="alice",
            key="k0",
            value=2,
            modality="believed",
            audience=("alice", "carol"),
            valid_at=MAR,
        ).body(_no_refs()) | {"supersedes": named}
        response = http.post("/v1/memories", json=body, headers=relay)
        answers.append(
            (response.status_code, Namer({named: "named"}).fresh().normal(body_of(response)))
        )
    assert answers[0] == answers[1], f"missing id: {answers[0]}\nhidden head: {answers[1]}"


# --- 3. a client-chosen id equal to a hidden record's id -----------------------------------


@pytest.mark.parametrize("route", ["write", "upsert"])
def test_a_client_chosen_id_equal_to_a_hidden_id_answers_alike(stores: Stores, route: str) -> None:
    """Bob writes his own belief with the id of Alice's private record (B only)."""
    mine = Rec(
        seed=1001,
        holder="bob",
        key="k1",
        value=1,
        modality="believed",
        audience=("bob",),
        valid_at=MAR,
        id=HIDDEN,
    )
    args: dict[str, Any] = {"records": (mine,)}
    if route == "write":
        args["batch"] = False
    check(stores, Case(Asker("bob"), (), ((0, PRIVATE_HEAD),), (Op(route, args),)), all_stored=True)


# --- 4. /metrics on the public listener --------------------------------------------------


def test_metrics_do_not_count_a_forbidden_read_apart_from_a_missing_one(stores: Stores) -> None:
    """Two worlds: Bob GETs an id that is Alice's private record in B and nothing in A."""
    check(
        stores,
        Case(Asker("bob"), (), ((0, PRIVATE_HEAD),), (Op("get", {"ref": HIDDEN}),)),
        all_stored=True,
    )


def test_in_one_store_metrics_change_alike_for_a_forbidden_and_a_missing_id(
    stores: Stores,
) -> None:
    """One world: the public /metrics before and after a GET of a forbidden id, and
    before and after a GET of a missing id, change alike."""
    tenant = stores.pool.take()
    http = stores.b.http
    builder = as_(BUILDER, tenant, roles=BUILDER_ROLES)
    stored = http.post("/v1/memories", json=PRIVATE_HEAD.body(_no_refs()), headers=builder)
    assert stored.status_code == 201, stored.text
    forbidden = stored.json()["records"][0]["id"]

    def change_by_get(record_id: str) -> tuple[int, Any]:
        before = http.get("/metrics")
        got = http.get(f"/v1/memories/{record_id}", headers=as_("bob", tenant))
        assert got.status_code == 404, got.text
        after = http.get("/metrics")
        if after.status_code != 200:
            return after.status_code, None
        old, new = counters(before.text), counters(after.text)
        return 200, {k: v - old.get(k, 0.0) for k, v in new.items() if v != old.get(k, 0.0)}

    as_forbidden = change_by_get(forbidden)
    as_missing = change_by_get(MISSING_ID)
    assert as_forbidden == as_missing, f"forbidden: {as_forbidden}\nmissing:   {as_missing}"


# --- 8. a conflict is a conflict whatever the limit (one world) ------------------------------


@pytest.fixture
def meeting(stores: Stores) -> tuple[str, str]:
    """Alice believes `friday`, Bob believes `monday`; Carol may see both."""
    tenant = stores.pool.take()
    http = stores.a.http
    key = "meeting.day"
    for holder, day, seed in (("alice", "friday", 1), ("bob", "monday", 2)):
        body = Rec(
            seed=seed,
            holder=holder,
            key=key,
            value=0,
            modality="believed",
            audience=(holder, "carol"),
            valid_at=JAN,
        ).body(_no_refs())
        body["proposition"] |= {"value": day, "text": f"the meeting is on {day}"}
        response = http.post(
            "/v1/memories", json=body, headers=as_(BUILDER, tenant, roles=BUILDER_ROLES)
        )
        assert response.status_code == 201, response.text
    return tenant, key


@pytest.mark.parametrize("limit", [1, 2])
def test_a_recall_reports_the_conflict_whatever_its_limit(
    stores: Stores, meeting: tuple[str, str], limit: int
) -> None:
    tenant, key = meeting
    carol = as_("carol", tenant)

    def verdict(n: int) -> tuple[str, list[Any]]:
        body = {"query": "when is the meeting", "about": key, "limit": n}
        answer = stores.a.http.post("/v1/recall", json=body, headers=carol).json()
        views = sorted((v["holder"], v["value"]) for c in answer["conflicts"] for v in c["views"])
        return answer["verdict"], views

    wide = verdict(10)
    assert wide == ("conflict", [("alice", "friday"), ("bob", "monday")])
    assert verdict(limit) == wide, f"limit {limit}: {verdict(limit)}; limit 10: {wide}"


# --- 9. minds: derived views and one current view per mind (issue 26) ---------------------


def perceived(
    seed: int, holder: str, there: tuple[str, ...], audience: tuple[str, ...], valid_at: str
) -> Rec:
    """`holder`'s perception of an event where `there` were (the base of nested views)."""
    return Rec(
        seed=seed,
        holder=holder,
        key="k0",
        value=seed % 3,
        modality="observed",
        audience=audience,
        valid_at=valid_at,
        participants=there,
        perceived=True,
    )


def statement(seed: int, holder: str, hearers: tuple[str, ...], valid_at: str) -> Rec:
    return Rec(
        seed=seed,
        holder=holder,
        key="k0",
        value=seed % 3,
        modality="asserted",
        audience=(holder, *hearers),
        valid_at=valid_at,
        participants=(holder, *hearers),
        said=True,
    )


MIND_READS = (
    Op(
        "recall", {"query": "claim on k0", "about": "k0", "observer": "bob", "observed": ("alice",)}
    ),
    Op(
        "recall", {"query": "claim on k0", "observer": "bob", "observed": ("alice", "bob", "alice")}
    ),
    Op("recall", {"query": "claim on k0", "observed": ("alice",), "include_history": True}),
    Op("recall", {"query": "claim on k0", "about": "k0", "limit": 1}),
    Op("recall", {"query": "claim on k0", "about": "k0", "include_history": True}),
    Op("propositions", {"key": "k0", "audience": (), "depth": 4}),
    Op("propositions", {"key": "k0", "audience": (), "observer": "bob", "observed": ("alice",)}),
    Op("mcp", {"tool": "what_do_people_think", "key": "k0", "audience": (), "depth": 3}),
)


def test_a_later_view_bob_may_not_see_does_not_end_what_alice_told_him(stores: Stores) -> None:
    """Alice told Bob something in January; in store B she privately saw otherwise in
    February. As Bob may see her mind, her statement is still her current view."""
    told = statement(1, "alice", ("bob",), JAN)
    private = perceived(2, "alice", ("alice",), ("alice",), FEB)
    check(stores, Case(Asker("bob"), (told,), ((1, private),), MIND_READS), all_stored=True)


def test_an_event_bob_did_not_witness_changes_nothing_he_thinks_others_think(
    stores: Stores,
) -> None:
    """Bob and Alice saw k0 together in January; in store B, Alice saw it again in
    February with Carol (Bob absent), and Carol told Alice something in March."""
    together = perceived(1, "bob", ("bob", "alice"), ("bob",), JAN)
    hers = perceived(2, "alice", ("alice", "carol"), ("alice",), FEB)
    told = statement(3, "carol", ("alice",), MAR)
    hidden = ((1, hers), (1, told))
    check(stores, Case(Asker("bob"), (together,), hidden, MIND_READS), all_stored=True)


def test_an_unnoticed_witness_changes_nothing_the_noticed_one_observes(stores: Stores) -> None:
    """Bob saw k0 alone (as he thinks); in store B, Alice watched unnoticed."""
    alone = perceived(1, "bob", ("bob",), ("bob",), FEB)
    watcher = replace(perceived(2, "alice", ("bob", "alice"), ("alice",), FEB), unnoticed=True)
    check(stores, Case(Asker("bob"), (alone,), ((1, watcher),), MIND_READS), all_stored=True)


def _no_refs() -> Resolver:
    return Resolver()
