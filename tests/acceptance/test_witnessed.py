"""POST /v1/witnessed: what several people saw together, as each one's own view.

Who may record perception (a relay, never a participant for others), what a witness
is told, common knowledge from an announcement the whole group witnessed, the bound
on witnesses, and that a move someone did not witness changes nothing they observe.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

import httpx

from sidecar.embed.hashing import HashingEmbedder
from sidecar.messages import MAX_WITNESSES
from tests.acceptance.story import fresh_key
from tests.conftest import as_

EXTRACTOR = "extractor-bot"
TEAM = ["alice", "bob", "carol"]  # group:launch-team in the demo directory


def event(key: str, witnesses: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "proposition": {"text": "the marble is in the basket", "key": key, "value": "basket"},
        "witnessed_by": witnesses,
        "at": "2026-03-01T10:00:00Z",
        "source_id": "room-1",
        **extra,
    }


def post(http: httpx.Client, body: dict[str, Any], **who: str) -> httpx.Response:
    return http.post("/v1/witnessed", json=body, headers=as_(who.pop("writer", EXTRACTOR), **who))


def nothing_stored(http: httpx.Client, key: str, people: list[str]) -> None:
    for person in people:
        answer = http.get(f"/v1/propositions/{key}", headers=as_(person)).json()
        assert answer["perspectives"] == [], (person, answer)


def test_the_relay_is_told_what_it_wrote_and_nothing_about_the_chains(http: httpx.Client) -> None:
    key = fresh_key()
    response = post(http, event(key, ["sally", "anne"]))
    assert response.status_code == 201, response.text
    first = response.json()["records"]
    later = event(key, ["sally", "anne"], at="2026-03-01T11:00:00Z")
    later["proposition"] |= {"text": "the marble is in the box", "value": "box"}
    records = post(http, later).json()["records"]
    assert len(first) == len(records) == 2
    for record in records:
        assert record["provenance"] == {
            "writer": EXTRACTOR,
            "method": "witnessed",
            "derived_from": [],
        }
        # The relay may read none of them: it is not told which versions they replaced.
        assert "supersedes" not in record
    # Each witness is: their view moved on.
    [sallys] = [
        i
        for i in http.post(
            "/v1/recall",
            json={"query": "marble", "about": key, "observer": "sally", "include_history": True},
            headers=as_("sally"),
        ).json()["items"]
        if "observed_id" not in i and i["status"] == "current"
    ]
    assert sallys["proposition"]["value"] == "box"
    assert sallys["supersedes"] in {r["id"] for r in first}


def test_only_a_relay_records_perception(http: httpx.Client) -> None:
    key = fresh_key()
    response = post(http, event(key, ["sally", "anne"]), writer="sally")
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "write_refused"
    reasons = {r for problem in response.json()["reasons"] for r in problem["reasons"]}
    assert {"source_needs_role", "evidence_needs_role", "writer_not_holder"} <= reasons
    nothing_stored(http, key, ["sally", "anne"])


def test_a_relay_in_the_room_never_records_the_others_perception(http: httpx.Client) -> None:
    key = fresh_key()
    response = post(http, event(key, ["robot", "anne"]), writer="robot", roles="extractor")
    assert response.status_code == 422, response.text
    refused = {
        (problem["index"], reason)
        for problem in response.json()["reasons"]
        for reason in problem["reasons"]
    }
    # Record 0 is the robot's own view: its own to record. Anne's (1) is not.
    assert refused == {(1, "perception_recorded_by_a_participant")}
    nothing_stored(http, key, ["robot", "anne"])


def test_an_announcement_the_whole_group_witnessed_is_common_knowledge(
    http: httpx.Client,
) -> None:
    key = fresh_key()
    body = event(
        key,
        TEAM,
        channel="hallway",  # not a qualifying channel: presence is what qualifies
        announcement={"speaker": "carol", "to": "group:launch-team"},
    )
    body["proposition"] = {"text": "the launch is October 17", "key": key, "value": "2026-10-17"}
    response = post(http, body)
    assert response.status_code == 201, response.text
    announced = response.json()["records"][-1]
    assert announced["modality"] == "common_knowledge"
    got = http.get(f"/v1/memories/{announced['id']}", headers=as_("bob")).json()["item"]
    assert got["usable_as"] == "common_knowledge"
    assert got["attribution"].startswith(
        "It is common knowledge in group:launch-team that the launch is October 17"
    )


def test_an_announcement_a_member_missed_is_refused_whole(http: httpx.Client) -> None:
    key = fresh_key()
    body = event(
        key, ["alice", "carol"], announcement={"speaker": "carol", "to": "group:launch-team"}
    )
    response = post(http, body)
    assert response.status_code == 422, response.text
    [problem] = response.json()["reasons"]
    assert (problem["index"], problem["reasons"]) == (2, ["common_knowledge_member_absent"])
    nothing_stored(http, key, TEAM)


def test_an_announcement_to_a_group_with_a_member_not_cleared_is_refused(
    http: httpx.Client,
) -> None:
    key = fresh_key()
    body = event(
        key,
        TEAM,
        access_scope="launch-core",  # bob is not cleared for it
        announcement={"speaker": "carol", "to": "group:launch-team"},
    )
    response = post(http, body)
    assert response.status_code == 422, response.text
    assert {
        (p["index"], tuple(p["reasons"])) for p in response.json()["reasons"] if p["index"] == 3
    } == {(3, ("common_knowledge_group_not_cleared",))}


def test_witnesses_are_bounded_before_anything_is_written(http: httpx.Client) -> None:
    key = fresh_key()
    crowd = [f"guest-{i}" for i in range(MAX_WITNESSES + 1)]
    response = post(http, event(key, crowd))
    assert response.status_code == 422, response.text
    [reason] = response.json()["reasons"]
    assert (reason["type"], reason["loc"]) == ("too_long", ["body", "witnessed_by"])
    nothing_stored(http, key, crowd[:1])


def test_the_largest_event_is_stored_whole(http: httpx.Client) -> None:
    key = fresh_key()
    crowd = [f"guest-{i}" for i in range(MAX_WITNESSES)]
    started = time.perf_counter()
    response = post(http, event(key, crowd))
    took = time.perf_counter() - started
    assert response.status_code == 201, response.text
    assert len(response.json()["records"]) == MAX_WITNESSES
    print(f"witnessed event, {MAX_WITNESSES} witnesses, {MAX_WITNESSES} records: {took:.2f}s")
    mind = http.get(f"/v1/propositions/{key}", headers=as_("guest-0")).json()["minds"]
    # guest-0 sees their own mind: their view, and their view of every other guest's.
    [own] = mind
    assert own["holder"] == "guest-0"
    assert len(own["views"]) == 1
    assert len(own["about"]) == MAX_WITNESSES - 1
    # Two deep: what they think each thinks each other thinks, derived (15 · 15 views).
    deeper = http.get(
        f"/v1/propositions/{key}", params={"depth": 2}, headers=as_("guest-0")
    ).json()["minds"]
    assert sum(len(o["about"]) for o in deeper[0]["about"]) == (MAX_WITNESSES - 1) ** 2


def test_recall_filters_on_whose_mind(http: httpx.Client) -> None:
    key = fresh_key()
    assert post(http, event(key, ["sally", "anne", "carol"])).status_code == 201

    def recall(**filters: Any) -> list[tuple[str, str | None]]:
        body = {"query": "marble", "about": key, **filters}
        items = http.post("/v1/recall", json=body, headers=as_("anne")).json()["items"]
        return sorted((i["observer_id"], i.get("observed_id")) for i in items)

    # A view of a mind is told to its holder: Anne's views of Sally and Carol are
    # Anne's; Carol's view of Sally is not Anne's to read.
    assert recall(observed="sally") == [("anne", "sally")]
    assert recall(observed="anne") == []
    assert recall(observer="anne", observed="carol") == [("anne", "carol")]
    assert recall(attitude="believes", observer="anne", observed="carol") == [("anne", "carol")]
    assert recall(attitude="knows", observed="carol") == []
    # Deeper: Anne's view of Carol's view of Sally's.
    assert recall(observer="anne", observed=["carol", "sally"]) == [("anne", "carol")]
    refused = http.post(
        "/v1/recall", json={"query": "marble", "attitude": "guesses"}, headers=as_("anne")
    )
    assert refused.status_code == 422
    assert refused.json()["reasons"][0]["loc"] == ["body", "attitude"]


def test_propositions_as_of_is_checked(http: httpx.Client) -> None:
    for bad in ("yesterday", "1066-10-14T00:00:00Z"):
        response = http.get(
            f"/v1/propositions/{fresh_key()}", params={"as_of": bad}, headers=as_("anne")
        )
        assert response.status_code == 422, response.text
        assert response.json()["reasons"][0]["loc"] == ["query", "as_of"]


def test_an_unnoticed_witness_is_named_in_nothing_the_others_are_told(
    http: httpx.Client,
) -> None:
    """The review's finding: Sally at the window, unseen, was revealed to Anne by a view
    of hers told to Anne. Nothing Anne may read says Sally was there."""
    key = fresh_key()
    assert post(http, event(key, ["sally", "anne"])).status_code == 201
    move = event(key, ["anne", "sally"], unnoticed=["sally"], at="2026-03-01T10:05:00Z")
    move["proposition"] |= {"text": "the marble is in the box", "value": "box"}
    assert post(http, move).status_code == 201
    anne = as_("anne")
    recalled = http.post(
        "/v1/recall",
        json={"query": "marble", "about": key, "include_history": True, "limit": 100},
        headers=anne,
    )
    assert recalled.status_code == 200, recalled.text
    items = recalled.json()["items"]
    answers = [
        recalled,
        http.get(f"/v1/propositions/{key}", headers=anne),
        http.get(f"/v1/propositions/{key}", params={"as_of": "2026-03-01T10:06:00Z"}, headers=anne),
        *(http.get(f"/v1/memories/{i['id']}", headers=anne) for i in items),
        *(http.get(f"/v1/memories/{i['id']}/history", headers=anne) for i in items),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        for item in _attributed(answer.json()):
            if str(item.get("valid_at", "")).startswith("2026-03-01T10:05"):
                assert "sally" not in json.dumps(item), item
    # Anne's own view of the move names nobody but her.
    [moved] = [i for i in items if i["valid_at"].startswith("2026-03-01T10:05")]
    assert moved["source"]["participants"] == ["anne"]


def _attributed(body: Any) -> list[dict[str, Any]]:
    """Every item, record or view in an answer (anything with an attribution or an id)."""
    found: list[dict[str, Any]] = []
    if isinstance(body, dict):
        if "attribution" in body or "observer_id" in body:
            found.append(body)
        for value in body.values():
            found += _attributed(value)
    elif isinstance(body, list):
        for value in body:
            found += _attributed(value)
    return found


# --- a move someone did not witness changes nothing they observe -------------------

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _canonical(body: Any) -> Any:
    """An answer with ids made anonymous (they differ between the two tenants) and
    lists sorted, so two answers compare equal when they say the same things."""
    if isinstance(body, dict):
        return {k: _canonical(v) for k, v in body.items() if k != "decision_id"}
    if isinstance(body, list):
        return sorted((_canonical(v) for v in body), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(body, str):
        return UUID_RE.sub("<id>", body)
    return body


def _sallys_observations(http: httpx.Client, tenant: str, key: str) -> list[Any]:
    sally = as_("sally", tenant=tenant)
    seen: list[Any] = []
    for body in (
        {"query": "where is the marble?"},
        {"query": "marble", "about": key, "include_history": True},
        {"query": "marble", "observed": "anne"},
        {"query": "marble", "as_of": "2026-03-01T10:06:00Z"},
    ):
        seen.append(http.post("/v1/recall", json=body, headers=sally).json())
    for params in ({}, {"as_of": "2026-03-01T10:06:00Z"}):
        answer = http.get(f"/v1/propositions/{key}", params=params, headers=sally)
        seen.append(answer.json())
    # Each of her records' history (the ids, and so their order, differ between tenants).
    histories = [
        http.get(f"/v1/memories/{item['id']}/history", headers=sally).json()
        for item in seen[1]["items"]
    ]
    return [*(_canonical(s) for s in seen), _canonical(histories)]


def test_sally_observes_nothing_of_a_move_she_did_not_witness(http: httpx.Client) -> None:
    key = fresh_key()
    worlds = {}
    for moved in (False, True):
        tenant = f"tom-{uuid.uuid4().hex[:8]}"
        relay = {"writer": EXTRACTOR, "tenant": tenant, "roles": "extractor"}
        assert post(http, event(key, ["sally", "anne"]), **relay).status_code == 201
        if moved:
            move = event(key, ["anne"], at="2026-03-01T10:05:00Z")
            move["proposition"] |= {"text": "the marble is in the box", "value": "box"}
            assert post(http, move, **relay).status_code == 201
            # Anne herself sees the move: the two worlds do differ.
            anne = http.get(f"/v1/propositions/{key}", headers=as_("anne", tenant=tenant))
            assert "box" in anne.text
        worlds[moved] = _sallys_observations(http, tenant, key)
    assert worlds[False] == worlds[True]
    assert "basket" in json.dumps(worlds[True])


# --- records that tie in score: ordered by id (docs/security.md) ---------


def test_records_that_tie_in_score_are_ordered_by_id(http: httpx.Client) -> None:
    # Records with one embedding tie in score, and the engine's order among them is not
    # a function of what is shown. Which of the tied points a fetch returns depends on
    # their (random) ids, so several sets are paged: a cut inside the tie was seen on
    # about half of single sets. (An event's records no longer tie: each one's indexed
    # text names its holder, embed/indexed.py; so the tie is made with a given vector.)
    vector = HashingEmbedder(384).embed("the marble is in the basket")
    for _ in range(5):
        key = fresh_key()
        text = f"the marble is in the basket {key}"
        beliefs = [
            {
                "content": f"{who} believes {text}",
                "proposition": {"text": text, "key": key, "value": "basket"},
                "observer_id": who,
                "source_id": "room-1",
                "source": {"kind": "conversation", "speaker": who},
                "modality": "believed",
                "audience": [who, "narrator"],
                "valid_at": "2026-03-01T10:00:00Z",
                "vector": vector,
            }
            for who in ("sally", "anne", "carol")
        ]
        stored = http.post("/v1/memories", json=beliefs, headers=as_(EXTRACTOR))
        assert stored.status_code == 201, stored.text
        narrator = as_("narrator")
        recall = {"vector": vector, "limit": 100, "about": key}
        items = http.post("/v1/recall", json=recall, headers=narrator).json()["items"]
        assert len(items) == 3
        assert len({i["score"] for i in items}) == 1
        assert [i["id"] for i in items] == sorted(i["id"] for i in items)
        # Pages by offset add up to every record once, in that order.
        paged: list[str] = []
        for start in range(0, 4, 2):
            query = {
                "query": vector,
                "limit": 2,
                "offset": start,
                "filter": {"must": [{"key": "proposition.key", "match": {"value": key}}]},
            }
            page = http.post(
                "/collections/whose_memories/points/query", json=query, headers=narrator
            )
            assert page.status_code == 200, page.text
            paged += [str(p["id"]) for p in page.json()["result"]["points"]]
        assert paged == [i["id"] for i in items], key
