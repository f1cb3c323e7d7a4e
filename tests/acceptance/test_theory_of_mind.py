"""Theory of mind: the Sally-Anne false-belief test and its second-order variants,
through the public API only.

Sally and Anne are in a room with a marble. Sally puts it in the basket and leaves;
Anne moves it to the box; Sally comes back. Where will Sally look? Where does Anne
think Sally will look? Where is the marble really, and where was it at the start?
An extractor that knows who was present posts each event once (`POST /v1/witnessed`);
a narrator with the authority role keeps the world state; the narrator also reads
every mind (`readers`), as the experimenter does in the classic test.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.acceptance.story import fresh_key
from tests.conftest import as_

EXTRACTOR = "extractor-bot"
NARRATOR = "narrator"
START = "2026-03-01T10:00:00Z"
MOVED = "2026-03-01T10:05:00Z"
LATER = "2026-03-01T10:10:00Z"


def marble(key: str, where: str) -> dict[str, str]:
    return {"text": f"the marble is in the {where}", "key": key, "value": where}


def witnessed(
    http: httpx.Client, key: str, where: str, witnesses: list[str], at: str, **extra: Any
) -> list[dict[str, Any]]:
    event = {
        "proposition": marble(key, where),
        "witnessed_by": witnesses,
        "at": at,
        "source_id": "sally-anne-room",
        "readers": [NARRATOR],
        **extra,
    }
    response = http.post("/v1/witnessed", json=event, headers=as_(EXTRACTOR))
    assert response.status_code == 201, response.text
    return list(response.json()["records"])


def world_state(http: httpx.Client, key: str, where: str, at: str) -> None:
    """The narrator's stage directions: where the marble really is (an authority)."""
    record = {
        "content": f"The marble is in the {where}",
        "proposition": marble(key, where),
        "source_id": "stage-directions",
        "source": {"kind": "change_record"},
        "modality": "world_state",
        "audience": [NARRATOR],
        "valid_at": at,
    }
    response = http.post("/v1/memories", json=record, headers=as_(NARRATOR, roles="authority"))
    assert response.status_code == 201, response.text


def propositions(http: httpx.Client, who: str, key: str, **params: str) -> dict[str, Any]:
    response = http.get(f"/v1/propositions/{key}", params=params, headers=as_(who))
    assert response.status_code == 200, response.text
    return dict(response.json())


def recall(http: httpx.Client, who: str, **body: Any) -> dict[str, Any]:
    response = http.post(
        "/v1/recall", json={"query": "where is the marble?", **body}, headers=as_(who)
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def mind(answer: dict[str, Any], holder: str) -> dict[str, Any]:
    """What `holder` thinks, and thinks each other person thinks: {who: [values]}."""
    [found] = [m for m in answer["minds"] if m["holder"] == holder] or [{"views": [], "about": []}]
    values = {holder: [v["value"] for v in found["views"]]}
    return values | {o["observed"]: [v["value"] for v in o["views"]] for o in found["about"]}


def sally_anne(http: httpx.Client, key: str, sally_at_the_window: bool = False) -> None:
    world_state(http, key, "basket", START)
    witnessed(http, key, "basket", ["sally", "anne"], START)
    # Sally leaves. Anne moves the marble, seen by nobody (or by Sally, unseen, at the window).
    world_state(http, key, "box", MOVED)
    if sally_at_the_window:
        witnessed(http, key, "box", ["anne", "sally"], MOVED, unnoticed=["sally"])
    else:
        witnessed(http, key, "box", ["anne"], MOVED)


def test_sally_looks_where_she_left_it(http: httpx.Client) -> None:
    key = fresh_key()
    sally_anne(http, key)

    # Where will Sally look? Her own view, on her own memory: the basket (false belief).
    sally = recall(http, "sally", about=key, observer="sally")
    [own] = [i for i in sally["items"] if "observed_id" not in i]
    assert own["proposition"]["value"] == "basket"
    assert own["attribution"].startswith("sally saw that the marble is in the basket")
    assert own["usable_as"] == "belief"
    assert own["modality"] == "observed"
    # Nothing Sally is shown mentions the move she did not see.
    assert "box" not in http.get(f"/v1/propositions/{key}", headers=as_("sally")).text

    # Where does Anne think Sally will look? One nested belief, found by filter.
    anne_on_sally = recall(http, "anne", about=key, observer="anne", observed="sally")
    [nested] = anne_on_sally["items"]
    assert nested["proposition"]["value"] == "basket"
    assert nested["usable_as"] == "nested_belief"
    assert nested["attribution"].startswith(
        "anne saw that sally believes that the marble is in the basket"
    )
    # Anne herself knows better.
    assert mind(propositions(http, "anne", key), "anne") == {"anne": ["box"], "sally": ["basket"]}

    # The narrator sees every mind, and where the marble really is.
    now = propositions(http, NARRATOR, key)
    assert now["verdict"] == "answer"
    assert now["world_state"]["proposition"]["value"] == "box"
    assert now["world_state"]["usable_as"] == "fact"
    assert mind(now, "sally") == {"sally": ["basket"], "anne": ["basket"]}
    assert mind(now, "anne") == {"anne": ["box"], "sally": ["basket"]}

    # And at the start, before the move: everyone, and the world, had it in the basket.
    then = propositions(http, NARRATOR, key, as_of="2026-03-01T10:01:00Z")
    assert then["as_of"] == "2026-03-01T10:01:00Z"
    assert then["world_state"]["proposition"]["value"] == "basket"
    assert mind(then, "sally") == {"sally": ["basket"], "anne": ["basket"]}
    assert mind(then, "anne") == {"anne": ["basket"], "sally": ["basket"]}


def test_each_witness_view_is_one_chain_that_the_next_event_supersedes(
    http: httpx.Client,
) -> None:
    key = fresh_key()
    sally_anne(http, key)
    anne = recall(http, "anne", about=key, observer="anne", include_history=True)["items"]
    own = sorted((i for i in anne if "observed_id" not in i), key=lambda i: str(i["valid_at"]))
    assert [(i["proposition"]["value"], i["status"]) for i in own] == [
        ("basket", "superseded"),
        ("box", "current"),
    ]
    assert own[1]["supersedes"] == own[0]["id"]
    # Sally's chain was not touched by the move: one version, still current.
    sally = recall(http, "sally", about=key, observer="sally")["items"]
    [sallys] = [i["id"] for i in sally if "observed_id" not in i]
    history = http.get(f"/v1/memories/{sallys}/history", headers=as_("sally")).json()
    assert [i["status"] for i in history["items"]] == ["current"]


def test_sally_at_the_window_holds_a_true_belief_anne_does_not_know_of(
    http: httpx.Client,
) -> None:
    key = fresh_key()
    sally_anne(http, key, sally_at_the_window=True)

    now = propositions(http, NARRATOR, key)
    # Sally saw the move (true belief), and saw Anne make it.
    assert mind(now, "sally") == {"sally": ["box"], "anne": ["box"]}
    # Anne did not see Sally at the window: she still thinks Sally thinks basket
    # (the second-order false belief).
    assert mind(now, "anne") == {"anne": ["box"], "sally": ["basket"]}
    anne_on_sally = recall(http, "anne", about=key, observed="sally")["items"]
    assert [i["proposition"]["value"] for i in anne_on_sally] == ["basket"]
    # Nor does anything Anne is shown say Sally was there when the marble moved.
    [anne_saw_the_move] = [
        i
        for i in recall(http, "anne", about=key, observer="anne")["items"]
        if "observed_id" not in i
    ]
    assert anne_saw_the_move["source"]["participants"] == ["anne"]


def test_a_third_person_who_entered_after_the_move(http: httpx.Client) -> None:
    key = fresh_key()
    sally_anne(http, key)
    # Carol comes in after the move: she saw nothing of the marble.
    carol = propositions(http, "carol", key)
    assert carol["verdict"] == "abstain"
    assert carol["minds"] == []
    assert "carol" not in {m["holder"] for m in propositions(http, NARRATOR, key)["minds"]}

    # Recording that Carol saw the move is refused: she was not there.
    claim = {
        "content": "carol saw that the marble is in the box",
        "proposition": marble(key, "box"),
        "observer_id": "carol",
        "source_id": "sally-anne-room",
        "source": {"kind": "perception", "participants": ["anne"]},
        "modality": "observed",
        "evidence": [{"kind": "witnessed", "ref": "sally-anne-room", "by": "carol"}],
        "audience": ["carol"],
        "valid_at": MOVED,
    }
    refused = http.post("/v1/memories", json=claim, headers=as_(EXTRACTOR))
    assert refused.status_code == 422, refused.text
    assert refused.json()["reasons"][0]["reasons"] == ["perception_holder_absent"]

    # Anne then shows Carol the box; Sally is still out.
    witnessed(http, key, "box", ["anne", "carol"], LATER)
    now = propositions(http, NARRATOR, key)
    assert mind(now, "carol") == {"carol": ["box"], "anne": ["box"]}
    assert mind(now, "anne") == {"anne": ["box"], "carol": ["box"], "sally": ["basket"]}
    assert mind(now, "sally") == {"sally": ["basket"], "anne": ["basket"]}
    # Carol sees her own mind (and her view of Anne's), never Anne's nor Sally's: a
    # view of a mind is told to its holder.
    assert {m["holder"] for m in propositions(http, "carol", key)["minds"]} == {"carol"}
    assert mind(propositions(http, "carol", key), "carol") == {"carol": ["box"], "anne": ["box"]}
