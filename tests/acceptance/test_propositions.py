"""GET /v1/propositions/{key}: every disclosable perspective, and the world state."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.acceptance.story import fresh_key, launch_17, launch_24, said_by, stored
from tests.conftest import as_

TEAM = ["group:launch-team"]


def change_record(key: str, value: str) -> dict[str, Any]:
    return {
        "content": f"Change record CR-7 sets the launch to {value}",
        "proposition": {"text": f"the launch is on {value}", "key": key, "value": value},
        "source_id": "CR-7",
        "source": {"kind": "change_record"},
        "modality": "world_state",
        "evidence": [{"kind": "change_record", "ref": "CR-7"}],
        "audience": TEAM,
    }


def test_every_perspective_and_the_authoritative_answer(http: httpx.Client) -> None:
    key = fresh_key()
    stored(http, "alice", said_by("alice", "s1", audience=TEAM, proposition=launch_17(key)))
    stored(http, "bob", said_by("bob", "s2", audience=TEAM, proposition=launch_24(key)))
    [fact] = stored(http, "release-bot", change_record(key, "2026-10-24"))

    view = http.get(f"/v1/propositions/{key}", headers=as_("carol")).json()

    assert view["verdict"] == "answer"
    assert view["world_state"]["id"] == fact["id"]
    assert view["world_state"]["usable_as"] == "fact"
    assert view["world_state"]["obligations"] == ["cite_source"]
    holders = sorted(p["observer_id"] for p in view["perspectives"])
    assert holders == ["alice", "bob"]
    [conflict] = view["conflicts"]  # Alice still disagrees; kept as context
    assert {v.get("holder") for v in conflict["views"]} == {"alice", "bob", None}


def test_perspectives_are_gated_per_asker(http: httpx.Client) -> None:
    key = fresh_key()
    stored(http, "alice", said_by("alice", "s3", proposition=launch_17(key)))  # private
    stored(http, "bob", said_by("bob", "s4", audience=TEAM, proposition=launch_24(key)))

    bob = http.get(f"/v1/propositions/{key}", headers=as_("bob"))

    assert bob.json()["verdict"] == "attributed"
    assert [p["observer_id"] for p in bob.json()["perspectives"]] == ["bob"]
    assert "October 17" not in bob.text


def test_unknown_key_and_forbidden_key_look_the_same(http: httpx.Client) -> None:
    key = fresh_key()
    stored(http, "alice", said_by("alice", "s5", proposition=launch_17(key)))
    forbidden = http.get(f"/v1/propositions/{key}", headers=as_("bob")).json()
    unknown = http.get(f"/v1/propositions/{fresh_key()}", headers=as_("bob")).json()
    for body in (forbidden, unknown):
        del body["decision_id"], body["key"]
    assert (
        forbidden
        == unknown
        == {
            "verdict": "abstain",
            "perspectives": [],
            "conflicts": [],
            "minds": [],
            "truncated": False,
        }
    )


def test_an_unverified_world_state_claim_is_not_an_answer(http: httpx.Client) -> None:
    key = fresh_key()
    rumour = change_record(key, "2026-11-01") | {
        "source": {"kind": "conversation", "speaker": "bob"},
        "evidence": [],
    }
    stored(http, "bob", rumour)
    view = http.get(f"/v1/propositions/{key}", headers=as_("carol")).json()
    assert view["verdict"] == "attributed"
    assert "world_state" not in view
    [claim] = view["perspectives"]
    assert claim["usable_as"] == "unverified_claim"
    assert "verify_before_acting" in claim["obligations"]


def test_nobody_can_replace_an_authoritys_fact(http: httpx.Client) -> None:
    key = fresh_key()
    [fact] = stored(http, "release-bot", change_record(key, "2026-10-24"))
    rumour = change_record(key, "2026-12-01") | {
        "source": {"kind": "conversation", "speaker": "bob"},
        "evidence": [],
        "audience": ["bob"],
    }
    stored(http, "bob", rumour)  # Bob's own unverified claim, in a chain of his own
    view = http.get(f"/v1/propositions/{key}", headers=as_("alice")).json()
    assert view["verdict"] == "answer"
    assert view["world_state"]["id"] == fact["id"]
    named = rumour | {"proposition": {"text": "x"}, "supersedes": fact["id"]}
    refused = http.post("/v1/memories", json=named, headers=as_("bob"))
    assert refused.json()["reasons"][0]["reasons"] == ["cannot_supersede"]


def test_a_second_authoritys_fact_is_never_dropped(http: httpx.Client) -> None:
    key = fresh_key()
    older = change_record(key, "2026-10-24") | {"valid_at": "2026-10-01T00:00:00Z"}
    [first] = stored(http, "release-bot", older)
    second = change_record(key, "2026-10-24") | {"valid_at": "2026-10-02T00:00:00Z"}
    response = http.post("/v1/memories", json=second, headers=as_("ops-bot", roles="authority"))
    assert response.status_code == 201, response.text
    [newer] = response.json()["records"]

    view = http.get(f"/v1/propositions/{key}", headers=as_("carol")).json()

    assert view["verdict"] == "answer"
    assert view["world_state"]["id"] == newer["id"]
    assert [p["id"] for p in view["perspectives"]] == [first["id"]]
    assert view["perspectives"][0]["usable_as"] == "fact"


def test_disagreeing_authorities_give_a_conflict_and_no_world_state(
    http: httpx.Client,
) -> None:
    key = fresh_key()
    [first] = stored(http, "release-bot", change_record(key, "2026-10-24"))
    other = change_record(key, "2026-11-07")
    response = http.post("/v1/memories", json=other, headers=as_("ops-bot", roles="authority"))
    assert response.status_code == 201, response.text
    [second] = response.json()["records"]

    view = http.get(f"/v1/propositions/{key}", headers=as_("carol")).json()

    assert view["verdict"] == "conflict"
    assert "world_state" not in view
    assert sorted(p["id"] for p in view["perspectives"]) == sorted([first["id"], second["id"]])
    [conflict] = view["conflicts"]
    assert sorted(v["value"] for v in conflict["views"]) == ["2026-10-24", "2026-11-07"]


@pytest.mark.parametrize("suffix", ["/eu", "\nwest", "/eu\nwest"])
def test_a_key_with_a_slash_or_a_newline_can_be_looked_up(http: httpx.Client, suffix: str) -> None:
    key = fresh_key() + suffix
    [mine] = stored(http, "alice", said_by("alice", "s9", proposition=launch_17(key)))
    for path in (f"/v1/propositions/{quote(key)}", f"/v1/propositions/{quote(key, safe='')}"):
        view = http.get(path, headers=as_("alice")).json()
        assert view["key"] == key
        assert [p["id"] for p in view["perspectives"]] == [mine["id"]]
