"""POST /v1/observations: what a speaker said becomes the speaker's own view."""

from __future__ import annotations

from typing import Any

import httpx

from tests.acceptance.story import fresh_key, recall
from tests.conftest import as_


def observe(http: httpx.Client, writer: str, body: dict[str, Any]) -> httpx.Response:
    return http.post("/v1/observations", json=body, headers=as_(writer))


def private_session(key: str) -> dict[str, Any]:
    # Alice, alone with the agent: "The launch is October 17. I think Bob already knows."
    launch = {"text": "the launch is October 17", "key": key, "value": "2026-10-17"}
    return {
        "speaker": "alice",
        "source_id": "private-session-42",
        "channel": "dm",
        "participants": ["alice"],
        "said_at": "2026-10-01T09:00:00Z",
        "claims": [
            {"proposition": launch},
            {"proposition": launch, "about": "bob", "attitude": "knows", "hedged": True},
        ],
    }


def test_claims_are_grounded_in_the_speaker(http: httpx.Client) -> None:
    response = observe(http, "extractor-bot", private_session(fresh_key()))

    assert response.status_code == 201, response.text
    plain, about_bob = response.json()["records"]
    assert plain["observer_id"] == about_bob["observer_id"] == "alice"
    assert plain["modality"] == "asserted"
    assert "observed_id" not in plain
    # B_alice(K_bob p), never K_bob(p).
    assert about_bob["modality"] == "reported_belief"
    assert about_bob["observed_id"] == "bob"
    assert about_bob["observed_attitude"] == "knows"
    assert about_bob["content"] == "alice thinks that bob knows that the launch is October 17"
    # A private session: only the speaker may hear it back.
    assert plain["audience"] == about_bob["audience"] == ["alice"]
    assert plain["source"] == {
        "kind": "conversation",
        "speaker": "alice",
        "channel": "dm",
        "participants": ["alice"],
    }
    assert plain["valid_at"] == "2026-10-01T09:00:00Z"
    assert plain["provenance"]["writer"] == "extractor-bot"


def test_bob_learns_nothing_from_alices_private_session(http: httpx.Client) -> None:
    key = fresh_key()
    observe(http, "extractor-bot", private_session(key))
    bob = recall(http, "bob", query="when is the launch?")
    assert bob.json()["verdict"] == "abstain"
    assert "October 17" not in bob.text
    by_key = recall(http, "bob", query="launch", about=key)
    assert by_key.json()["items"] == []


def test_audience_is_who_was_present(http: httpx.Client) -> None:
    body = private_session(fresh_key()) | {"participants": ["alice", "carol"], "channel": "standup"}
    [plain, _] = observe(http, "extractor-bot", body).json()["records"]
    assert plain["audience"] == ["alice", "carol"]
    carol = http.get(f"/v1/memories/{plain['id']}", headers=as_("carol"))
    assert carol.json()["item"]["attribution"].startswith("alice said that the launch")
    assert http.get(f"/v1/memories/{plain['id']}", headers=as_("bob")).status_code == 404


def test_speaker_may_report_themselves(http: httpx.Client) -> None:
    assert observe(http, "alice", private_session(fresh_key())).status_code == 201


def test_nobody_may_put_words_in_anothers_mouth(http: httpx.Client) -> None:
    response = observe(http, "bob", private_session(fresh_key()))
    assert response.status_code == 422
    # Bob also said Alice was there, which is not his to attest (issue 35).
    expected = {"writer_not_holder", "presence_not_attested"}
    assert all(set(p["reasons"]) == expected for p in response.json()["reasons"])


def test_a_later_statement_supersedes_the_speakers_earlier_one(http: httpx.Client) -> None:
    key = fresh_key()
    first = observe(http, "alice", private_session(key)).json()["records"][0]
    later = private_session(key) | {"said_at": "2026-10-08T09:00:00Z"}
    later["claims"] = [
        {"proposition": {"text": "the launch is October 24", "key": key, "value": "2026-10-24"}}
    ]
    [second] = observe(http, "alice", later).json()["records"]
    assert second["supersedes"] == first["id"]
    now = recall(http, "alice", query="launch", about=key).json()
    first_person = [i for i in now["items"] if "observed_id" not in i]
    assert [i["proposition"]["value"] for i in first_person] == ["2026-10-24"]
    # Her belief about Bob is another chain, and stays as it was.
    [about_bob] = [i for i in now["items"] if i.get("observed_id") == "bob"]
    assert about_bob["proposition"]["value"] == "2026-10-17"


def test_a_group_is_not_a_participant(http: httpx.Client) -> None:
    # docs/design.md §6: audience ⊆ who was present; a group is not someone in the room.
    body = private_session(fresh_key()) | {"participants": ["alice", "group:launch-team"]}
    response = observe(http, "extractor-bot", body)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_request"
    [reason] = response.json()["reasons"]
    assert reason["type"] == "group_is_not_a_person_present"
    assert reason["loc"] == ["body", "participants", 1]
    carol = recall(http, "carol", query="launch", about=body["claims"][0]["proposition"]["key"])
    assert carol.json()["items"] == []


def test_a_group_is_not_a_speaker(http: httpx.Client) -> None:
    body = private_session(fresh_key()) | {"speaker": "group:launch-team"}
    response = observe(http, "extractor-bot", body)
    assert response.status_code == 422, response.text
    assert [r["type"] for r in response.json()["reasons"]] == ["group_is_not_a_person_present"]


def test_a_group_is_not_a_mind(http: httpx.Client) -> None:
    # "alice says that group:launch-team knows p" would hand the belief to whoever joins.
    key = fresh_key()
    for about in ("group:launch-team", ["bob", "group:launch-team"]):
        body = private_session(key)
        body["claims"] = [{"proposition": {"text": "p", "key": key}, "about": about}]
        response = observe(http, "extractor-bot", body)
        assert response.status_code == 422, response.text
        assert response.json()["error"] == "invalid_request"
        assert "group_is_not_a_mind" in {r["type"] for r in response.json()["reasons"]}
    assert recall(http, "alice", query="p", about=key).json()["items"] == []


def test_a_person_has_one_name_however_it_is_spelt(http: httpx.Client) -> None:
    # The extractor spells Bob as the text does; Bob's token (or dev header) as his
    # identity provider does. One person, one mind (issue 35: "Bob" and "bob" were two).
    key = fresh_key()
    launch = {"text": "the launch is October 17", "key": key, "value": "2026-10-17"}
    body = private_session(key) | {
        "speaker": "Alice",
        "participants": ["ALICE", "Bob"],
        "claims": [{"proposition": launch, "about": "Bob", "attitude": "knows"}],
    }
    response = observe(http, "extractor-bot", body)
    assert response.status_code == 201, response.text
    [record] = response.json()["records"]
    assert record["observer_id"] == "alice"
    assert record["observed_id"] == "bob"
    assert record["audience"] == ["alice", "bob"]
    # Asked by any spelling, it is the same mind, and Bob (however his header spells
    # him) is in the audience.
    for spelt in ("bob", "BOB", "\uff22\uff4f\uff42"):  # the last in full-width letters
        found = recall(http, "alice", query="launch", about=key, observed=spelt).json()
        assert [i["id"] for i in found["items"]] == [record["id"]], spelt
    assert http.get(f"/v1/memories/{record['id']}", headers=as_("Bob")).status_code == 200


# --- presence is attested (issue 35) --------------------------------------------------------


def standup(key: str) -> dict[str, Any]:
    # Alice at the stand-up, Bob listed as there to hear her.
    return private_session(key) | {"participants": ["alice", "bob"], "channel": "standup"}


def heard_by_bob(http: httpx.Client, key: str) -> list[dict[str, Any]]:
    """What Bob heard Alice say about the key (derived from her statements when read)."""
    body = {"query": "launch", "about": key, "observer": "bob", "observed": "alice"}
    answer = recall(http, "bob", **body, speech_act=True)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def test_only_an_attesting_role_says_who_else_was_there(http: httpx.Client) -> None:
    """Who may attest that someone was present is the write policy's call
    (config.attestation.presence): alice, posting her own words with no relay role,
    cannot put "bob heard alice say ..." in Bob's memory by listing him."""
    key = fresh_key()
    refused = observe(http, "alice", standup(key))
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "write_refused"
    problems = refused.json()["reasons"]
    assert problems
    assert all(p["reasons"] == ["presence_not_attested"] for p in problems)
    # Nothing of it was stored: Bob heard nothing, and nobody holds anything of it.
    assert heard_by_bob(http, key) == []
    for who in ("bob", "alice"):
        assert recall(http, who, query="launch", about=key).json()["items"] == []

    # Alice listing only herself is her own statement, as before; Bob still heard nothing.
    assert observe(http, "alice", private_session(key)).status_code == 201
    assert heard_by_bob(http, key) == []

    # The extractor that transcribed the stand-up attests who was there.
    relayed = fresh_key()
    stored = observe(http, "extractor-bot", standup(relayed))
    assert stored.status_code == 201, stored.text
    assert all(r["audience"] == ["alice", "bob"] for r in stored.json()["records"])
    heard = heard_by_bob(http, relayed)
    assert heard
    assert {(item["act"], item["observer_id"]) for item in heard} == {("heard", "bob")}
