"""Conversations as an extractor sees them (issue 40): raw turns with no proposition
keys, what someone heard from anyone, and who is in the room over time.

An extractor of free conversation has no keys: it posts each turn as a quoted claim.
Each such claim is its own line (keyed by the utterance), so it has the minds a keyed
claim has: the hearers heard the speaker say it and model the speaker's belief, and
what each thinks the others heard is askable to any depth.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from sidecar.bench import rooms
from sidecar.client import DevIdentity, WhoseClient
from tests.conftest import as_, start_sidecar, stop

EXTRACTOR = "extractor-bot"


@pytest.fixture
def tenant() -> str:
    """A tenant of its own per test: conversations never meet."""
    return f"conv-{uuid.uuid4().hex[:8]}"


def say(
    http: httpx.Client,
    tenant: str,
    speaker: str,
    text: str,
    at: str,
    participants: list[str] | None = None,
    source_id: str = "kitchen",
    **extra: Any,
) -> list[dict[str, Any]]:
    body: dict[str, Any] = {
        "speaker": speaker,
        "source_id": source_id,
        "said_at": at,
        "claims": [{"proposition": {"text": text}, "quoted": True}],
        **extra,
    }
    if participants is not None:
        body["participants"] = participants
    response = http.post(
        "/v1/observations", json=body, headers=as_(EXTRACTOR, tenant, roles="extractor")
    )
    assert response.status_code == 201, response.text
    return list(response.json()["records"])


def recall(http: httpx.Client, tenant: str, who: str, **body: Any) -> list[dict[str, Any]]:
    response = http.post(
        "/v1/recall",
        json={"query": "what was said?", "observer": who, "limit": 50} | body,
        headers=as_(who, tenant),
    )
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def contents(items: list[dict[str, Any]]) -> list[str]:
    return sorted(i["content"].split(" — ")[0] for i in items)


def test_an_unkeyed_turn_has_the_minds_of_a_keyed_one(http: httpx.Client, tenant: str) -> None:
    room = ["bob", "carol"]
    [first] = say(
        http, tenant, "alice", "I moved the keys to the drawer", "2026-03-01T10:00:00Z", room
    )
    [second] = say(http, tenant, "alice", "I lost my phone", "2026-03-01T10:01:00Z", room)
    # Each turn is a line of its own, named by the utterance: neither supersedes the other.
    assert first["proposition"]["key"].startswith("said.")
    assert first["proposition"]["key"] != second["proposition"]["key"]
    # Bob heard Alice say each, and thinks she believes each.
    heard = recall(http, tenant, "bob", observed="alice", speech_act=True)
    assert contents(heard) == [
        "bob heard alice say that “I lost my phone” (in alice's words, said on 1 March 2026)",
        "bob heard alice say that “I moved the keys to the drawer” (in alice's words, "
        "said on 1 March 2026)",
    ]
    thinks = recall(http, tenant, "bob", observed="alice", speech_act=False)
    assert len(thinks) == 2
    assert all(i["usable_as"] == "nested_belief" for i in thinks)
    # Second order: Carol thinks Bob thinks Alice believes each.
    second_order = recall(http, tenant, "carol", observed=["bob", "alice"], speech_act=False)
    assert contents(second_order) == [
        "carol believes that bob believes that alice believes that “I lost my phone” "
        "(in alice's words, said on 1 March 2026)",
        "carol believes that bob believes that alice believes that “I moved the keys to "
        "the drawer” (in alice's words, said on 1 March 2026)",
    ]
    # Dave was not there: nothing of it reaches him, at any depth.
    assert recall(http, tenant, "dave", observed="alice") == []
    assert recall(http, tenant, "dave", observed=["bob", "alice"]) == []


def test_a_repost_of_a_turn_is_the_same_line(http: httpx.Client, tenant: str) -> None:
    """An utterance id names the line: the same turn posted twice (a retry, a replay
    with the words corrected) is one line; the same words in another turn are another."""
    [first] = say(
        http, tenant, "alice", "I am tired", "2026-03-01T10:00:00Z", ["bob"], utterance_id="t1"
    )
    [again] = say(
        http, tenant, "alice", "I am so tired", "2026-03-01T10:00:30Z", ["bob"], utterance_id="t1"
    )
    [other] = say(
        http, tenant, "alice", "I am tired", "2026-03-01T10:01:00Z", ["bob"], utterance_id="t2"
    )
    assert first["proposition"]["key"] == again["proposition"]["key"]
    assert other["proposition"]["key"] != first["proposition"]["key"]
    heard = contents(recall(http, tenant, "bob", observed="alice", speech_act=True))
    assert [h.split("“")[1].split("”")[0] for h in heard] == ["I am so tired", "I am tired"]


def test_what_someone_heard_from_anyone(http: httpx.Client, tenant: str) -> None:
    """ "What did c hear?" and "what does a think b heard?" without naming the speaker,
    to the depth of beliefs, worded "a believes that b heard s say p"."""
    say(http, tenant, "alice", "I moved the keys", "2026-03-01T10:00:00Z", ["bob", "carol"])
    say(http, tenant, "dave", "I am leaving early", "2026-03-01T10:01:00Z", ["carol"])
    say(
        http,
        tenant,
        "dave",
        "the boiler is broken",
        "2026-03-01T10:02:00Z",
        ["alice", "bob", "carol"],
    )
    said_on = " (in {0}'s words, said on 1 March 2026)"
    heard = contents(recall(http, tenant, "carol", heard=True))
    assert heard == [
        "carol heard alice say that “I moved the keys”" + said_on.format("alice"),
        "carol heard dave say that “I am leaving early”" + said_on.format("dave"),
        "carol heard dave say that “the boiler is broken”" + said_on.format("dave"),
    ]
    # Bob was not there when Dave said he was leaving early.
    assert len(recall(http, tenant, "bob", heard=True)) == 2
    # What Carol thinks Bob heard: from anyone, but only where Bob was.
    assert contents(recall(http, tenant, "carol", observed="bob", heard=True)) == [
        "carol believes that bob heard alice say that “I moved the keys”" + said_on.format("alice"),
        "carol believes that bob heard dave say that “the boiler is broken”"
        + said_on.format("dave"),
    ]
    # The speaker too knows who heard them.
    assert contents(recall(http, tenant, "alice", observed="carol", heard=True)) == [
        "alice believes that carol heard alice say that “I moved the keys”"
        + said_on.format("alice"),
        "alice believes that carol heard dave say that “the boiler is broken”"
        + said_on.format("dave"),
    ]
    # Third order.
    assert contents(recall(http, tenant, "carol", observed=["bob", "alice"], heard=True)) == [
        "carol believes that bob believes that alice heard dave say that “the boiler is broken”"
        + said_on.format("dave"),
    ]
    # Someone who heard nothing learns nothing, at any depth.
    assert recall(http, tenant, "erin", heard=True) == []
    assert recall(http, tenant, "erin", observed="carol", heard=True) == []
    # heard is a speech act: with speech_act false there is nothing.
    assert recall(http, tenant, "carol", heard=True, speech_act=False) == []


def test_heard_needs_an_observer_and_is_bounded(http: httpx.Client, tenant: str) -> None:
    """The speaker is one more mind: a chain of hearers is at most the depth less one."""
    refusals = {
        "heard_needs_an_observer": {"query": "q", "heard": True},
        "observed_deeper_than_4": {
            "query": "q",
            "observer": "a",
            "observed": ["b", "c", "d", "e"],
            "heard": True,
        },
    }
    for reason, body in refusals.items():
        response = http.post("/v1/recall", json=body, headers=as_("a", tenant))
        assert response.status_code == 422, reason
        assert response.json() == {"error": "invalid_request", "reasons": [reason]}
    deepest = {"query": "q", "observer": "a", "observed": ["b", "c", "d"], "heard": True}
    assert http.post("/v1/recall", json=deepest, headers=as_("a", tenant)).status_code == 200


# --- conversations with membership ------------------------------------------------------


def members(
    http: httpx.Client,
    tenant: str,
    source_id: str,
    *changes: dict[str, Any],
    writer: str = EXTRACTOR,
    roles: str = "extractor",
) -> httpx.Response:
    return http.post(
        f"/v1/conversations/{source_id}/membership",
        json={"changes": list(changes)},
        headers=as_(writer, tenant, roles=roles),
    )


def change(person: str, kind: str, at: str, **extra: Any) -> dict[str, Any]:
    return {"person": person, "change": kind, "at": at, **extra}


def alice_and_bob_join(http: httpx.Client, tenant: str) -> httpx.Response:
    """A relay records alice and bob joining the hall at 10:00."""
    return members(
        http,
        tenant,
        "hall",
        change("alice", "join", "2026-03-01T10:00:00Z"),
        change("bob", "join", "2026-03-01T10:00:00Z"),
    )


def heard_by(http: httpx.Client, tenant: str, who: str) -> list[str]:
    """The words of every turn `who` heard anyone say."""
    return sorted(
        i["content"].split("“")[1].split("”")[0] for i in recall(http, tenant, who, heard=True)
    )


def test_members_hear_what_is_said_while_they_are_in_the_room(
    http: httpx.Client, tenant: str
) -> None:
    opened = http.post(
        "/v1/conversations",
        json={
            "source_id": "kitchen",
            "members": ["alice", "bob", "carol", "dave"],
            "at": "2026-03-01T10:00:00Z",
        },
        headers=as_(EXTRACTOR, tenant, roles="extractor"),
    )
    assert opened.status_code == 201, opened.text
    assert sorted(e["person"] for e in opened.json()["events"]) == ["alice", "bob", "carol", "dave"]
    [first] = say(http, tenant, "alice", "the cake is in the oven", "2026-03-01T10:01:00Z")
    assert sorted(first["audience"]) == ["alice", "bob", "carol", "dave"]
    left = members(http, tenant, "kitchen", change("dave", "leave", "2026-03-01T10:02:00Z"))
    assert left.status_code == 201, left.text
    say(http, tenant, "bob", "I took the cake out", "2026-03-01T10:03:00Z")
    joined = members(http, tenant, "kitchen", change("erin", "join", "2026-03-01T10:04:00Z"))
    assert joined.status_code == 201, joined.text
    say(http, tenant, "carol", "the cake is on the table", "2026-03-01T10:05:00Z")
    # Explicit participants still win.
    say(http, tenant, "alice", "I ate a slice", "2026-03-01T10:06:00Z", participants=["bob"])
    # A turn posted late, said while Dave was still there, is heard by him.
    say(http, tenant, "carol", "I am hungry", "2026-03-01T10:01:30Z")
    assert heard_by(http, tenant, "dave") == ["I am hungry", "the cake is in the oven"]
    assert heard_by(http, tenant, "erin") == ["the cake is on the table"]
    assert heard_by(http, tenant, "bob") == sorted(
        ["I ate a slice", "I am hungry", "the cake is in the oven", "the cake is on the table"]
    )
    assert heard_by(http, tenant, "carol") == ["I took the cake out", "the cake is in the oven"]
    # What Dave, who left, thinks the others heard: only what was said while he was there.
    thinks = contents(recall(http, tenant, "dave", observed="bob", heard=True))
    assert sorted(t.split("“")[1].split("”")[0] for t in thinks) == [
        "I am hungry",
        "the cake is in the oven",
    ]


def test_membership_is_attested_and_corrections_are_policy(http: httpx.Client, tenant: str) -> None:
    opened = alice_and_bob_join(http, tenant)
    assert opened.status_code == 201, opened.text
    wrong = members(http, tenant, "hall", change("bob", "leave", "2026-03-01T10:01:00Z"))
    [wrong_leave] = wrong.json()["events"]
    say(http, tenant, "alice", "the door is locked", "2026-03-01T10:02:00Z", source_id="hall")
    assert heard_by(http, tenant, "bob") == []
    # Another relay may not correct the event; its writer may (a Rego decision).
    withdraw = change("bob", "none", "2026-03-01T10:01:00Z", corrects=wrong_leave["id"])
    refused = members(http, tenant, "hall", withdraw, writer="other-bot")
    assert refused.status_code == 422
    assert refused.json() == {
        "error": "write_refused",
        "reasons": [{"index": 0, "reasons": ["not_event_writer", "role_required:authority"]}],
    }
    assert members(http, tenant, "hall", withdraw).status_code == 201
    say(http, tenant, "alice", "the door is open", "2026-03-01T10:03:00Z", source_id="hall")
    # What was already written keeps its audience; the correction shapes what follows.
    assert heard_by(http, tenant, "bob") == ["the door is open"]
    # Nobody but a relay records a join, one's own included (whoever could add
    # themselves would hear the members, from any instant they named); anyone records
    # their own leaving.
    own = members(
        http,
        tenant,
        "hall",
        change("carol", "join", "2000-01-01T00:00:00Z"),
        writer="carol",
        roles="",
    )
    assert own.json()["reasons"] == [{"index": 0, "reasons": ["presence_not_attested"]}]
    gone = members(
        http,
        tenant,
        "hall",
        change("carol", "leave", "2026-03-01T10:04:00Z"),
        writer="carol",
        roles="",
    )
    assert gone.status_code == 201, gone.text
    theirs = members(
        http,
        tenant,
        "hall",
        change("dave", "join", "2026-03-01T10:04:00Z"),
        writer="carol",
        roles="",
    )
    assert theirs.json()["reasons"] == [{"index": 0, "reasons": ["presence_not_attested"]}]
    # Each batch is audited, stored or refused: who was said to be present, by whom.
    entries = http.get(
        "/v1/audit",
        params={"purpose": "membership"},
        headers=as_("erin", tenant, roles="auditor"),
    ).json()["entries"]
    audited = {
        (
            e["asker"],
            c["person"],
            c["change"],
            c["event_id"] is not None,
            tuple(c["refused_because"]),
        )
        for e in entries
        for c in e["membership"]["changes"]
    }
    assert (EXTRACTOR, "bob", "leave", True, ()) in audited
    assert ("carol", "carol", "join", False, ("presence_not_attested",)) in audited
    assert ("carol", "carol", "leave", True, ()) in audited
    assert ("other-bot", "bob", "none", False, ("not_event_writer", "role_required:authority")) in (
        audited
    )
    # A correction must name an event of this conversation.
    unknown = members(
        http,
        tenant,
        "hall",
        change("bob", "none", "2026-03-01T10:01:00Z", corrects=str(uuid.uuid4())),
    )
    assert unknown.status_code == 422
    assert unknown.json() == {"error": "invalid_request", "reasons": ["0.corrects_no_event"]}
    # `none` only withdraws an event.
    bare = members(http, tenant, "hall", change("bob", "none", "2026-03-01T10:01:00Z"))
    assert bare.status_code == 422
    assert bare.json()["reasons"][0]["type"] == "nothing_to_correct"


def test_a_writer_who_may_not_attest_presence_is_heard_alone(
    http: httpx.Client, tenant: str
) -> None:
    """Whether membership is read never depends on who is in the conversation: a
    speaker posting their own words without participants is their own audience."""
    members(
        http,
        tenant,
        "den",
        change("alice", "join", "2026-03-01T10:00:00Z"),
        change("bob", "join", "2026-03-01T10:00:00Z"),
    )
    body = {
        "speaker": "alice",
        "source_id": "den",
        "said_at": "2026-03-01T10:01:00Z",
        "claims": [{"proposition": {"text": "alice likes tea"}}],
    }
    for source_id in ("den", "empty-room"):
        response = http.post(
            "/v1/observations", json=body | {"source_id": source_id}, headers=as_("alice", tenant)
        )
        assert response.status_code == 201, response.text
        assert response.json()["records"][0]["audience"] == ["alice"]


# --- an extractor with membership events only answers as one listing participants ------


def turns_in(items: list[dict[str, Any]]) -> set[str]:
    """The utterances items are views of (each turn's words end with its number)."""
    return {"t" + i["content"].split(", turn ")[1].split("”")[0] for i in items}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_membership_events_answer_as_listed_participants(http: httpx.Client, seed: int) -> None:
    """A generated room (sidecar/bench/rooms.py: people join and leave, turns in their
    own words without keys) posted twice: with membership events only, through the
    Python client, and with each turn's participants listed. Every question of who
    heard what, first and second order, gets the same answer both ways, and the
    answer is who was in the room (known by construction)."""
    room = rooms.generate(seed, f"room-{seed}")
    by_membership, by_participants = (f"conv-{uuid.uuid4().hex[:8]}" for _ in range(2))
    dev = DevIdentity(asker=EXTRACTOR, tenant=by_membership, roles=["extractor"])
    with WhoseClient(str(http.base_url), dev=dev) as client:
        for path, body in rooms.posts(room, "unkeyed", "membership"):
            if path == "/v1/conversations":
                client.open_conversation(body)
            elif path.endswith("/membership"):
                client.change_membership(room.source_id, body)
            else:
                client.observe(body)
    for path, body in rooms.posts(room, "unkeyed", "participants"):
        response = http.post(
            path, json=body, headers=as_(EXTRACTOR, by_participants, roles="extractor")
        )
        assert response.status_code == 201, response.text

    def asked(tenant: str, who: str, **body: Any) -> list[str]:
        items = recall(http, tenant, who, **({"heard": True, "limit": 100} | body))
        return sorted(i["content"] for i in items)

    for person in room.people:
        first = asked(by_membership, person)
        assert first == asked(by_participants, person)
        assert turns_in(recall(http, by_membership, person, heard=True, limit=100)) == room.heard(
            person
        )
        for other in room.people:
            if other == person:
                continue
            second = asked(by_membership, person, observed=other)
            assert second == asked(by_participants, person, observed=other)
            # What the person thinks the other believes (what the other said to them).
            thinks = {"observed": other, "heard": False, "speech_act": False}
            assert asked(by_membership, person, **thinks) == asked(
                by_participants, person, **thinks
            )
            items = recall(http, by_membership, person, observed=other, heard=True, limit=100)
            assert turns_in(items) == room.thinks_heard(person, other), (person, other)


def test_a_writer_learns_nothing_of_the_events_others_recorded(tmp_path: Path) -> None:
    """The bound on membership events is the writer's own in the conversation: carol's
    own leaving (which the policy lets anyone record) is stored, and her join refused,
    alike in a hall the relay filled and an empty attic (a bound on the conversation's
    count told her the hall was full)."""
    tenant = f"conv-{uuid.uuid4().hex[:8]}"
    base, process = start_sidecar(tmp_path, env={"WHOSE_CONVERSATION_MAX_EVENTS": "2"})
    try:
        with httpx.Client(base_url=base, timeout=60) as http:
            full = alice_and_bob_join(http, tenant)
            assert full.status_code == 201, full.text
            more = members(http, tenant, "hall", change("dan", "join", "2026-03-01T10:01:00Z"))
            assert more.json() == {"error": "invalid_request", "reasons": ["at_most_2_events"]}
            tries = (("leave", "2026-03-01T10:02:00Z"), ("join", "2026-03-01T10:03:00Z"))
            carols = [
                members(http, tenant, room, change("carol", kind, at), writer="carol", roles="")
                for kind, at in tries
                for room in ("hall", "attic")
            ]
    finally:
        stop(process)
    left_hall, left_attic, joined_hall, joined_attic = carols
    assert (left_hall.status_code, left_attic.status_code) == (201, 201), left_hall.text
    joins = [(r.status_code, r.json()) for r in (joined_hall, joined_attic)]
    assert joins[0] == joins[1]
    assert joins[0][1]["reasons"] == [{"index": 0, "reasons": ["presence_not_attested"]}]
