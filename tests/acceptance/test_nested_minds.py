"""Minds of any depth, what people tell each other, and one current view per mind
(issue 26), through the public API on both store backends.

The story (a higher-order Sally-Anne, as in the theory-of-mind benchmarks): Sally,
Anne and Carol see the marble put in the basket; Sally leaves, and Anne and Carol see
it moved to the box; Carol leaves, and Anne alone moves it to the drawer. Each
question is asked as the person it is about, to order 4. Then what people tell each
other: the speech act and the hearer's model of the speaker's belief for each
hearer, adoption only as the trust policy says (by default never; the shipped
authority and more-recent-evidence examples switched on over OPA's data API), and a
person who said one thing and then saw another holds only the latter, while what
they told others stays what they were told.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import POLICY_DIR, Backend, as_, start_opa, start_sidecar, stop

EXTRACTOR = "extractor-bot"
NARRATOR = "narrator"
T0, T1, T2, T3, T4 = (f"2026-03-01T10:{m:02d}:00Z" for m in (0, 5, 10, 15, 20))


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, store_backend: Backend
) -> Iterator[tuple[httpx.Client, str]]:
    """A sidecar on this backend, and the OPA it asks (policies as plain files: no
    decision cache, so trust settings put over OPA's data API decide at once)."""
    folder = tmp_path_factory.mktemp("nested")
    opa, opa_process = start_opa(POLICY_DIR, folder / "opa.log")
    env = {"WHOSE_OPA_URL": opa} | store_backend.env()
    try:
        base, process = start_sidecar(folder / "sidecar", env=env)
    except BaseException:
        stop(opa_process)
        raise
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            yield client, opa
    finally:
        stop(process)
        stop(opa_process)


@pytest.fixture
def http(served: tuple[httpx.Client, str]) -> httpx.Client:
    return served[0]


@pytest.fixture
def tenant() -> str:
    """A tenant of its own per test: stories never meet."""
    return f"minds-{uuid.uuid4().hex[:8]}"


def marble(key: str, where: str) -> dict[str, str]:
    return {"text": f"the marble is in the {where}", "key": key, "value": where}


def witnessed(
    http: httpx.Client, tenant: str, key: str, where: str, who: list[str], at: str, **extra: Any
) -> None:
    event = {
        "proposition": marble(key, where),
        "witnessed_by": who,
        "at": at,
        "source_id": "room",
        "readers": [NARRATOR],
        **extra,
    }
    response = http.post(
        "/v1/witnessed", json=event, headers=as_(EXTRACTOR, tenant, roles="extractor")
    )
    assert response.status_code == 201, response.text


def said(
    http: httpx.Client,
    tenant: str,
    speaker: str,
    hearers: list[str],
    claim: dict[str, Any],
    at: str,
) -> list[dict[str, Any]]:
    body = {
        "speaker": speaker,
        "source_id": "room-talk",
        "participants": hearers,
        "said_at": at,
        "claims": [claim],
    }
    response = http.post(
        "/v1/observations", json=body, headers=as_(EXTRACTOR, tenant, roles="extractor")
    )
    assert response.status_code == 201, response.text
    return list(response.json()["records"])


def where(
    http: httpx.Client, tenant: str, who: str, key: str, *chain: str, **extra: Any
) -> list[Any]:
    """Where `who` thinks the marble is (with a chain: thinks chain[0] thinks …), as
    `who` asks: the values of the items recalled."""
    body: dict[str, Any] = {"query": "where is the marble?", "about": key, "observer": who}
    if chain:
        body["observed"] = list(chain)
    body |= extra
    response = http.post("/v1/recall", json=body, headers=as_(who, tenant))
    assert response.status_code == 200, response.text
    return [i["proposition"]["value"] for i in response.json()["items"]]


def story(http: httpx.Client, tenant: str, key: str) -> None:
    witnessed(http, tenant, key, "basket", ["sally", "anne", "carol"], T0)
    # Sally leaves; Anne and Carol see the marble moved to the box.
    witnessed(http, tenant, key, "box", ["anne", "carol"], T1)
    # Carol leaves; Anne alone moves it to the drawer.
    witnessed(http, tenant, key, "drawer", ["anne"], T2)


def test_orders_one_to_four_each_asked_as_the_person_concerned(
    http: httpx.Client, tenant: str
) -> None:
    key = f"marble.{uuid.uuid4().hex[:6]}"
    story(http, tenant, key)
    # Order 1: each one's own view.
    assert where(http, tenant, "sally", key) == ["basket"]
    assert where(http, tenant, "carol", key) == ["box"]
    assert where(http, tenant, "anne", key) == ["drawer"]
    # Order 2: where does Anne think Carol thinks it is? …
    assert where(http, tenant, "anne", key, "carol") == ["box"]
    assert where(http, tenant, "anne", key, "sally") == ["basket"]
    assert where(http, tenant, "carol", key, "anne") == ["box"]
    assert where(http, tenant, "sally", key, "carol") == ["basket"]
    # Order 3: where does Anne think Carol thinks Sally thinks it is?
    assert where(http, tenant, "anne", key, "carol", "sally") == ["basket"]
    assert where(http, tenant, "carol", key, "anne", "carol") == ["box"]
    assert where(http, tenant, "sally", key, "anne", "carol") == ["basket"]
    # Order 4.
    assert where(http, tenant, "anne", key, "carol", "anne", "carol") == ["box"]
    assert where(http, tenant, "carol", key, "anne", "sally", "anne") == ["basket"]
    assert where(http, tenant, "anne", key, "sally", "carol", "sally") == ["basket"]
    # And as of before the second move, Carol's order-3 view was the basket.
    assert where(http, tenant, "carol", key, "anne", "carol", as_of="2026-03-01T10:01:00Z") == [
        "basket"
    ]
    # With the history asked for: every view of that line, the earlier ones superseded.
    body = {"query": "marble", "about": key, "observer": "anne", "observed": ["carol"]}
    history = http.post(
        "/v1/recall", json=body | {"include_history": True}, headers=as_("anne", tenant)
    ).json()["items"]
    assert sorted((i["valid_at"], i["proposition"]["value"], i["status"]) for i in history) == [
        (T0, "basket", "superseded"),
        (T1, "box", "current"),
    ]
    # One item, worded mind by mind, usable only as a nested belief.
    body = {"query": "marble", "about": key, "observer": "anne", "observed": ["carol", "sally"]}
    [item] = http.post("/v1/recall", json=body, headers=as_("anne", tenant)).json()["items"]
    assert item["attribution"].startswith(
        "anne saw that carol believes that sally believes that the marble is in the basket"
    )
    assert item["usable_as"] == "nested_belief"
    assert item["observed_path"] == ["carol", "sally"]
    assert item["derived_from"]
    # A derived view has no record of its own; the record it comes from is Anne's.
    assert http.get(f"/v1/memories/{item['id']}", headers=as_("anne", tenant)).status_code == 404
    base = http.get(f"/v1/memories/{item['derived_from']}", headers=as_("anne", tenant))
    assert base.json()["record"]["observer_id"] == "anne"
    # Nobody else reads Anne's mind: Carol's question about it is her own mind's.
    assert where(http, tenant, "carol", key, "anne", "carol") == ["box"]
    body = {"query": "marble", "about": key, "observer": "anne", "observed": ["carol"]}
    assert http.post("/v1/recall", json=body, headers=as_("carol", tenant)).json()["items"] == []


def test_minds_nest_to_the_depth_asked_for(http: httpx.Client, tenant: str) -> None:
    key = f"marble.{uuid.uuid4().hex[:6]}"
    story(http, tenant, key)

    def minds(who: str, **params: Any) -> dict[str, Any]:
        response = http.get(f"/v1/propositions/{key}", params=params, headers=as_(who, tenant))
        assert response.status_code == 200, response.text
        return {m["holder"]: m for m in response.json()["minds"]}

    def at(mind: dict[str, Any], *chain: str) -> list[Any]:
        node: dict[str, Any] = mind
        for name in chain:
            [node] = [o for o in node["about"] if o["observed"] == name]
        return [v["value"] for v in node["views"]]

    everyone = minds(NARRATOR, depth=3)
    assert at(everyone["anne"]) == ["drawer"]
    assert at(everyone["anne"], "carol") == ["box"]
    assert at(everyone["anne"], "carol", "sally") == ["basket"]
    assert at(everyone["anne"], "carol", "anne", "sally") == ["basket"]
    assert at(everyone["carol"], "anne", "carol") == ["box"]
    # Depth 1 (the default) nests one level, as before.
    assert all(not o["about"] for o in minds(NARRATOR)["anne"]["about"])
    # Sally's own mind, as she may see it: the start of the story, nothing of the moves.
    sally = minds("sally", depth=4)
    assert set(sally) == {"sally"}
    assert at(sally["sally"], "anne", "carol", "anne") == ["basket"]
    # One chain of minds: only those views.
    one = minds(NARRATOR, observer="anne", observed=["carol", "sally"])
    assert set(one) == {"anne"}
    assert at(one["anne"], "carol", "sally") == ["basket"]
    # As of before any move.
    start = minds(NARRATOR, depth=2, as_of="2026-03-01T10:01:00Z")
    assert at(start["anne"], "carol", "sally") == ["basket"]
    assert at(start["carol"]) == ["basket"]


def test_depth_is_bounded(http: httpx.Client, tenant: str) -> None:
    five = ["a", "b", "c", "d", "e"]
    body = {"query": "marble", "observer": "z", "observed": five}
    refused = http.post("/v1/recall", json=body, headers=as_("z", tenant))
    assert refused.status_code == 422, refused.text
    assert refused.json()["reasons"] == ["observed_deeper_than_4"]
    deep = http.get("/v1/propositions/k", params={"depth": 5}, headers=as_("z", tenant))
    assert deep.status_code == 422, deep.text


def test_an_unnoticed_witness_is_never_revealed(http: httpx.Client, tenant: str) -> None:
    key = f"marble.{uuid.uuid4().hex[:6]}"
    witnessed(http, tenant, key, "basket", ["sally", "anne"], T0)
    # Sally watches the move through the window: Anne never saw her.
    witnessed(http, tenant, key, "box", ["anne", "sally"], T1, unnoticed=["sally"])
    # Sally holds the true belief, and knows Anne still thinks she thinks basket.
    assert where(http, tenant, "sally", key) == ["box"]
    assert where(http, tenant, "sally", key, "anne") == ["box"]
    assert where(http, tenant, "sally", key, "anne", "sally") == ["basket"]
    assert where(http, tenant, "anne", key, "sally") == ["basket"]
    # Nothing Anne may read says Sally was there when the marble moved: records,
    # audiences, participants, minds, histories, statuses.
    anne = as_("anne", tenant)
    seen = [
        http.post(
            "/v1/recall",
            json={"query": "marble", "about": key, "include_history": True, "limit": 100},
            headers=anne,
        ),
        http.get(f"/v1/propositions/{key}", params={"depth": 4}, headers=anne),
        http.get(f"/v1/propositions/{key}", params={"as_of": T1}, headers=anne),
    ]
    items = seen[0].json()["items"]
    seen += [http.get(f"/v1/memories/{i['id']}/history", headers=anne) for i in items]
    for response in seen:
        assert response.status_code == 200, response.text
        body = response.json()
        for item in _items(body):
            if item.get("valid_at", "").startswith(T1[:16]):
                assert "sally" not in str(item), item
    assert all(i["observer_id"] == "anne" for i in items)


def _items(body: Any) -> Iterator[dict[str, Any]]:
    if isinstance(body, dict):
        if "attribution" in body:
            yield body
        for value in body.values():
            yield from _items(value)
    elif isinstance(body, list):
        for value in body:
            yield from _items(value)


# --- what people tell each other --------------------------------------------------


def test_a_hearer_gets_the_speech_act_and_a_model_of_the_speakers_belief(
    http: httpx.Client, tenant: str
) -> None:
    key = f"launch.{uuid.uuid4().hex[:6]}"
    claim = {"proposition": {"text": "the launch is Friday", "key": key, "value": "friday"}}
    [statement] = said(http, tenant, "alice", ["bob", "carol"], claim, T0)
    assert statement["act"] == "said"

    def bob(**body: Any) -> list[dict[str, Any]]:
        body = {"query": "launch", "about": key} | body
        response = http.post("/v1/recall", json=body, headers=as_("bob", tenant))
        assert response.status_code == 200, response.text
        return list(response.json()["items"])

    heard, model = sorted(bob(observer="bob", observed="alice"), key=lambda i: "act" not in i)
    assert heard["act"] == "heard"
    assert heard["usable_as"] == "heard"
    assert heard["attribution"].startswith("bob heard alice say that the launch is Friday")
    assert "act" not in model
    assert model["usable_as"] == "nested_belief"
    assert model["attribution"].startswith("bob believes that alice believes that the launch")
    # Said versus believed, as a filter.
    assert [i["act"] for i in bob(observer="bob", observed="alice", speech_act=True)] == ["heard"]
    assert [i.get("act") for i in bob(observer="bob", observed="alice", speech_act=False)] == [None]
    # Alice's statement comes back as a statement, never a belief of hers.
    [told] = bob(observer="alice")
    assert (told["act"], told["usable_as"]) == ("said", "statement")
    assert told["attribution"].startswith("alice said that the launch is Friday")
    assert bob(observer="alice", speech_act=False) == []
    # By default nobody takes it as their own: Bob's own mind holds nothing of it.
    assert bob(observer="bob") == []
    # Carol, there too, thinks Bob heard it (the statement was public among them).
    body = {"query": "launch", "about": key, "observer": "carol", "observed": ["bob", "alice"]}
    items = http.post("/v1/recall", json=body, headers=as_("carol", tenant)).json()["items"]
    thinks, told = sorted(items, key=lambda i: "act" in i)
    assert thinks["proposition"]["value"] == "friday"
    assert thinks["attribution"].startswith(
        "carol believes that bob believes that alice believes that the launch is Friday"
    )
    assert told["attribution"].startswith(
        "carol believes that bob heard alice say that the launch is Friday"
    )


def test_a_hearer_models_what_the_speaker_said_of_someone_who_was_not_there(
    http: httpx.Client, tenant: str
) -> None:
    """Alice tells Bob that Dave believes the launch is Friday; Dave was not there. Bob
    heard it, and models Alice's view of Dave's mind (found by the leak oracle: the
    statement was sought only among those where Dave, too, was present)."""
    key = f"launch.{uuid.uuid4().hex[:6]}"
    claim = {
        "proposition": {"text": "the launch is Friday", "key": key},
        "about": "dave",
        "attitude": "believes",
    }
    [statement] = said(http, tenant, "alice", ["bob", "alice"], claim, T0)
    assert statement["observed_id"] == "dave"
    body = {"query": "launch", "about": key, "observer": "bob", "observed": ["alice", "dave"]}
    response = http.post("/v1/recall", json=body, headers=as_("bob", tenant))
    assert response.status_code == 200, response.text
    items = response.json()["items"]
    assert sorted(str(i.get("act")) for i in items) == ["None", "heard"]
    assert {i["derived_from"] for i in items} == {statement["id"]}


@pytest.fixture
def trust(served: tuple[httpx.Client, str]) -> Iterator[Any]:
    """Switch the trust policy's shipped examples on (policy data, over OPA's API)."""
    opa = served[1]

    def switch(settings: dict[str, Any], tenant: str, authorities: Sequence[str] = ()) -> None:
        url = f"{opa}/v1/data/whose/config/trust"
        assert httpx.put(url, json=settings, timeout=10).status_code == 204
        directory = {
            "principals": {who: {"roles": ["authority"], "scopes": []} for who in authorities},
            "groups": {},
        }
        url = f"{opa}/v1/data/whose/directory/tenants/{tenant}"
        assert httpx.put(url, json=directory, timeout=10).status_code == 204

    yield switch
    off = {"adopt_from_roles": [], "adopt_more_recent_evidence": False, "believe_told": False}
    assert httpx.put(f"{opa}/v1/data/whose/config/trust", json=off, timeout=10).status_code == 204


def test_adopt_from_an_authority_when_switched_on(
    http: httpx.Client, tenant: str, trust: Any
) -> None:
    key = f"marble.{uuid.uuid4().hex[:6]}"
    trust({"adopt_from_roles": ["authority"]}, tenant, authorities=["narrator"])
    witnessed(http, tenant, key, "basket", ["sally"], T0)
    records = said(http, tenant, "narrator", ["sally"], {"proposition": marble(key, "box")}, T1)
    # The writer is told the statement only.
    assert [r["observer_id"] for r in records] == ["narrator"]
    assert where(http, tenant, "sally", key) == ["box"]
    [own] = http.post(
        "/v1/recall",
        json={"query": "marble", "about": key, "observer": "sally"},
        headers=as_("sally", tenant),
    ).json()["items"]
    assert own["source"]["kind"] == "testimony"
    assert own["source"]["speaker"] == "narrator"
    assert own["usable_as"] == "belief"
    # Anyone without the role is not believed.
    said(http, tenant, "anne", ["sally"], {"proposition": marble(key, "shelf")}, T2)
    assert where(http, tenant, "sally", key) == ["box"]


def test_adopt_from_more_recent_evidence_when_switched_on(
    http: httpx.Client, tenant: str, trust: Any
) -> None:
    key = f"marble.{uuid.uuid4().hex[:6]}"
    trust({"adopt_more_recent_evidence": True}, tenant)
    witnessed(http, tenant, key, "basket", ["sally", "anne"], T0)
    witnessed(http, tenant, key, "box", ["anne"], T1)
    # Sally, who left first, tells Anne the basket: Anne saw later, and keeps the box.
    said(http, tenant, "sally", ["anne"], {"proposition": marble(key, "basket")}, T2)
    assert where(http, tenant, "anne", key) == ["box"]
    # Anne tells Sally the box: Anne's evidence is more recent, and Sally takes it.
    said(http, tenant, "anne", ["sally"], {"proposition": marble(key, "box")}, T3)
    assert where(http, tenant, "sally", key) == ["box"]
    # And still models Anne's belief from what Anne said.
    assert where(http, tenant, "sally", key, "anne", speech_act=False) == ["box"]


def test_believe_what_you_are_told_unless_you_saw_it_when_switched_on(
    http: httpx.Client, tenant: str, trust: Any
) -> None:
    """The convention of nested-belief benchmarks: a hearer believes what they are told
    unless they later saw otherwise, and trusts the later of two tellers."""
    key = f"marble.{uuid.uuid4().hex[:6]}"
    trust({"believe_told": True}, tenant)
    witnessed(http, tenant, key, "basket", ["sally", "anne", "carol"], T0)
    # Anne tells Sally the box (Sally saw the basket before): Sally believes Anne.
    said(http, tenant, "anne", ["sally"], {"proposition": marble(key, "box")}, T1)
    assert where(http, tenant, "sally", key) == ["box"]
    # Carol tells her the drawer later: the later teller wins.
    said(http, tenant, "carol", ["sally"], {"proposition": marble(key, "drawer")}, T2)
    assert where(http, tenant, "sally", key) == ["drawer"]
    # Then Sally sees it in the basket herself: what she saw later wins.
    witnessed(http, tenant, key, "basket", ["sally"], T3)
    assert where(http, tenant, "sally", key) == ["basket"]
    # A hedged claim is not taken.
    said(http, tenant, "anne", ["sally"], {"proposition": marble(key, "attic"), "hedged": True}, T4)
    assert where(http, tenant, "sally", key) == ["basket"]


def test_by_default_nothing_is_adopted_even_from_an_authority(
    http: httpx.Client, tenant: str, trust: Any
) -> None:
    key = f"marble.{uuid.uuid4().hex[:6]}"
    trust({}, tenant, authorities=["narrator"])
    witnessed(http, tenant, key, "basket", ["sally"], T0)
    said(http, tenant, "narrator", ["sally"], {"proposition": marble(key, "box")}, T1)
    assert where(http, tenant, "sally", key) == ["basket"]


def test_said_p_then_saw_not_p(http: httpx.Client, tenant: str) -> None:
    key = f"marble.{uuid.uuid4().hex[:6]}"
    # Abigail tells Bob the marble is in the basket (true then, or a lie: a statement).
    said(http, tenant, "abigail", ["bob"], {"proposition": marble(key, "basket")}, T0)
    # Later she sees it in the box, alone.
    witnessed(http, tenant, key, "box", ["abigail"], T1)

    def recall(who: str, **body: Any) -> dict[str, Any]:
        body = {"query": "where is the marble?", "about": key} | body
        response = http.post("/v1/recall", json=body, headers=as_(who, tenant))
        assert response.status_code == 200, response.text
        return dict(response.json())

    # As she sees it: one current view, the later perception; no conflict with herself.
    mine = recall("abigail")
    assert mine["verdict"] == "attributed", mine
    assert [i["proposition"]["value"] for i in mine["items"]] == ["box"]
    assert mine["conflicts"] == []
    history = recall("abigail", include_history=True)["items"]
    status = {i["proposition"]["value"]: i["status"] for i in history}
    assert status == {"basket": "superseded", "box": "current"}
    # The narrator, who may see both, agrees.
    narrator = http.get(f"/v1/propositions/{key}", headers=as_(NARRATOR, tenant)).json()
    assert [
        v["value"] for m in narrator["minds"] if m["holder"] == "abigail" for v in m["views"]
    ] in (
        [],  # the narrator reads the event but not Abigail's talk with Bob
        ["box"],
    )
    # What Bob was told stays what he was told.
    bob = recall("bob")
    assert [(i["observer_id"], i["proposition"]["value"]) for i in bob["items"]] == [
        ("abigail", "basket")
    ]
    assert where(http, tenant, "bob", key, "abigail") == ["basket", "basket"]


# --- integers are 64-bit, and kept exact ------------------------------------------


def test_integers_outside_int64_are_refused_and_inside_kept_exact(
    http: httpx.Client, tenant: str
) -> None:
    key = f"count.{uuid.uuid4().hex[:6]}"

    def belief(who: str, value: Any) -> dict[str, Any]:
        return {
            "content": f"{who} counted {value}",
            "proposition": {"text": f"the count is {value}", "key": key, "value": value},
            "observer_id": who,
            "source_id": "ledger",
            "source": {"kind": "conversation", "speaker": who},
            "modality": "believed",
            "audience": ["alice", "bob"],
            "valid_at": T0,
        }

    writer = as_(EXTRACTOR, tenant, roles="extractor")
    # 2**63 and 2**63 + 1 would both be 9.223372036854776e18 as floats: refused.
    for value in (2**63, 2**63 + 1, -(2**63) - 1, 2**70):
        refused = http.post("/v1/memories", json=belief("alice", value), headers=writer)
        assert refused.status_code == 422, refused.text
        assert "integer_out_of_range" in {r.get("type") for r in refused.json()["reasons"]}
    # The largest int64 and its neighbour survive the store exactly, and disagree.
    for who, value in (("alice", 2**63 - 1), ("bob", 2**63 - 2)):
        response = http.post("/v1/memories", json=belief(who, value), headers=writer)
        assert response.status_code == 201, response.text
    answer = http.post(
        "/v1/recall", json={"query": "count", "about": key}, headers=as_("alice", tenant)
    ).json()
    assert sorted(i["proposition"]["value"] for i in answer["items"]) == [2**63 - 2, 2**63 - 1]
    assert answer["verdict"] == "conflict"
    [conflict] = answer["conflicts"]
    assert sorted(v["value"] for v in conflict["views"]) == [2**63 - 2, 2**63 - 1]


def test_the_views_one_read_derives_are_bounded(tmp_path: Path) -> None:
    """Without an observer, every hearer of a statement holds a view of its speaker's
    mind: a read derives at most WHOSE_MAX_MIND_VIEWS of them, and says it stopped."""
    base, process = start_sidecar(tmp_path / "sidecar", env={"WHOSE_MAX_MIND_VIEWS": "10"})
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            key = f"launch.{uuid.uuid4().hex[:6]}"
            hearers = [f"h{i}" for i in range(12)]
            claim = {"proposition": {"text": "the launch is Friday", "key": key}}
            said(http, "acme", "alice", hearers, claim, T0)
            body = {"query": "launch", "about": key, "observed": ["alice"], "limit": 100}
            answer = http.post("/v1/recall", json=body, headers=as_("h0")).json()
            # h0 may see the statement: every hearer's two views of alice (24) are implied.
            assert len(answer["items"]) == 10
            assert answer["truncated"] is True
            mine = {**body, "observer": "h0"}
            answer = http.post("/v1/recall", json=mine, headers=as_("h0")).json()
            assert (len(answer["items"]), answer["truncated"]) == (2, False)
    finally:
        stop(process)
