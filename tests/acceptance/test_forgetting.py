"""Forgetting that lasts, and erasure by content, over HTTP and MCP on both store
backends (docs/forgetting.md).

"Never keep my PIN": a value rule erases what carries it now and masks it in every
later write, whoever restates it and through whichever write path; a key rule
refuses the subject's later claims of that key; the refusal names no rule, subject
or value; lifting the rule ends it. An erasure officer erases by content (a
proposition key, a query) records the officer cannot read; anyone else's request by
content reaches only their own records."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import as_, start_sidecar, stop
from tests.factories import mcp_call

PIN = "5532"


def shows_pin(text: str) -> bool:
    """Whether `text` holds the PIN as a value of its own: not where those digits fall
    inside an id or a timestamp's fraction ("…03:46:55.855532Z": a run failed on it)."""
    return re.search(rf"(?<![0-9A-Za-z]){PIN}(?![0-9A-Za-z])", text) is not None


@pytest.fixture
def http(sidecar_on: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sidecar_on, timeout=60) as client:
        yield client


def said(who: str, text: str, audience: list[str], key: str | None = None) -> dict[str, Any]:
    proposition: dict[str, Any] = {"text": text}
    if key is not None:
        proposition["key"] = key
    return {
        "content": f"{who} says {text}",
        "proposition": proposition,
        "observer_id": who,
        "source_id": f"{who}-chat",
        "source": {"kind": "conversation", "speaker": who},
        "modality": "asserted",
        "audience": audience,
    }


def write(http: httpx.Client, who: str, body: dict[str, Any]) -> httpx.Response:
    return http.post("/v1/memories", json=body, headers=as_(who))


def stored(http: httpx.Client, who: str, body: dict[str, Any]) -> dict[str, Any]:
    response = write(http, who, body)
    assert response.status_code == 201, response.text
    record: dict[str, Any] = response.json()["records"][0]
    return record


def recalled(http: httpx.Client, who: str, query: str) -> str:
    """Everything a recall at top 20 hands the agent, as text."""
    body = {"query": query, "limit": 20}
    response = http.post("/v1/recall", json=body, headers=as_(who))
    assert response.status_code == 200, response.text
    return response.text


def forget(http: httpx.Client, who: str, rule: dict[str, Any], **roles: str) -> httpx.Response:
    return http.post("/v1/forget-rules", json=rule, headers=as_(who, **roles))


def test_never_keep_my_pin_then_restatements(http: httpx.Client) -> None:
    user = f"alice-{uuid.uuid4().hex[:6]}"
    spouse = f"bob-{uuid.uuid4().hex[:6]}"
    before = stored(http, user, said(user, f"my bank PIN is {PIN}", [user], key="bank.pin"))
    assert PIN in recalled(http, user, "what is my bank PIN?")

    made = forget(http, user, {"kind": "value", "value": PIN, "reason": "user asked"})
    assert made.status_code == 201, made.text
    answer = made.json()
    assert not shows_pin(made.text)  # the answer never repeats the value
    assert answer["rule"]["value_length"] == 4
    assert answer["rule"]["subject"] == user
    assert answer["erasure"]["status"] == "done"
    assert answer["erasure"]["erased"] == 1
    assert http.get(f"/v1/memories/{before['id']}", headers=as_(user)).status_code == 404

    # Restated by the subject, by someone else, and through an extractor's observation.
    again = stored(http, user, said(user, f"{PIN} is deleted", [user]))
    assert not shows_pin(json.dumps(again))
    assert "[forgotten] is deleted" in again["content"]
    # Someone else's restatement in the subject's hearing: masked whole (a mask in
    # place would show them where the value sat in what they wrote).
    theirs = stored(http, spouse, said(spouse, f"her PIN is {PIN}", [spouse, user]))
    assert not shows_pin(json.dumps(theirs))
    assert theirs["content"] == "[forgotten]"
    # Their own private note, out of the subject's hearing, is theirs: a subject's rule
    # does not reach it (an erasure officer's does: test_a_refusal_tells_...).
    private = stored(http, spouse, said(spouse, f"I wrote down {PIN}", [spouse]))
    assert PIN in private["content"]
    http.delete(f"/v1/memories/{private['id']}", headers=as_(spouse)).raise_for_status()
    as_number = said(user, "the new PIN", [user], key="bank.pin")
    as_number["proposition"]["value"] = int(PIN)
    assert stored(http, user, as_number)["proposition"]["value"] == "[forgotten]"
    observed = http.post(
        "/v1/observations",
        json={
            "speaker": user,
            "source_id": "kitchen-7",
            "participants": [user],
            "claims": [{"proposition": {"text": f"{user}'s PIN is {PIN}", "value": PIN}}],
        },
        headers=as_("extractor-bot"),
    )
    assert observed.status_code == 201, observed.text
    assert not shows_pin(observed.text)

    for who in (user, spouse):
        shown = recalled(http, who, f"PIN {PIN}")
        assert not shows_pin(shown), who
    assert "[forgotten]" in recalled(http, user, "my PIN")


def test_a_forgotten_key_refuses_the_subjects_claims_only(http: httpx.Client) -> None:
    user = f"carol-{uuid.uuid4().hex[:6]}"
    other = f"dan-{uuid.uuid4().hex[:6]}"
    made = forget(http, user, {"kind": "key", "key": "door.code"})
    assert made.status_code == 201, made.text
    refused = write(http, user, said(user, "the door code is 8812", [user], key="door.code"))
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "write_refused"
    [problem] = refused.json()["reasons"]
    assert problem["reasons"] == ["forgotten"]
    # Another person's door code is theirs: the rule does not reach it.
    stored(http, other, said(other, "the door code is 8812", [other], key="door.code"))


def test_a_refusal_tells_a_writer_nothing_of_whose_rule(http: httpx.Client) -> None:
    """Two rules, of two subjects, one of them set by an officer: a third person's
    writes carrying either are refused alike, naming no rule, subject or value."""
    one, two = (f"p{i}-{uuid.uuid4().hex[:6]}" for i in (1, 2))
    forget(http, one, {"kind": "value", "value": "ZX-4471"}).raise_for_status()
    by_officer = forget(
        http, "dpo", {"kind": "value", "value": "QW-9902", "subject": two}, roles="data_protection"
    )
    assert by_officer.status_code == 201, by_officer.text
    writer = f"w-{uuid.uuid4().hex[:6]}"
    # In the hearing of the first rule's subject, and out of anyone's (the officer's
    # rule reaches every record): both masked whole, alike.
    masked = [
        stored(http, writer, said(writer, f"the locker is {code}", audience))
        for code, audience in (("ZX-4471", [writer, one]), ("QW-9902", [writer]))
    ]
    assert [m["content"] for m in masked] == ["[forgotten]"] * 2
    # Nothing but what the writer sent (the first audience names `one`, by the writer)
    # and the masks: no rule, no subject, no officer, no value.
    text = json.dumps([{k: v for k, v in m.items() if k != "audience"} for m in masked])
    for name in (one, two, "dpo", "ZX-4471", "QW-9902"):
        assert name not in text


def test_someone_else_may_not_set_or_lift_a_rule_for_the_subject(http: httpx.Client) -> None:
    user = f"erin-{uuid.uuid4().hex[:6]}"
    refused = forget(http, "mallory", {"kind": "value", "value": "7788", "subject": user})
    assert refused.status_code == 403
    assert refused.json() == {"error": "erasure_refused", "reasons": ["not_subject_or_officer"]}
    short = forget(http, user, {"kind": "value", "value": "77"})
    assert short.json() == {"error": "erasure_refused", "reasons": ["value_too_short"]}
    bad = forget(http, user, {"kind": "pattern", "pattern": "(a*)*b"})
    assert bad.json() == {"error": "erasure_refused", "reasons": ["pattern_not_allowed"]}
    malformed = forget(http, user, {"kind": "value", "key": "x"})
    assert malformed.status_code == 422

    rule = forget(http, user, {"kind": "value", "value": "7788"}).json()["rule"]
    hidden = http.delete(f"/v1/forget-rules/{rule['rule_id']}", headers=as_("mallory"))
    missing = http.delete(f"/v1/forget-rules/{uuid.uuid4()}", headers=as_("mallory"))
    assert (
        (hidden.status_code, hidden.json())
        == (missing.status_code, missing.json())
        == (
            404,
            {"error": "not_found", "reasons": []},
        )
    )
    listed = http.get("/v1/forget-rules", headers=as_(user)).json()["rules"]
    assert [r["rule_id"] for r in listed] == [rule["rule_id"]]
    assert "7788" not in json.dumps(listed)
    assert http.get("/v1/forget-rules", headers=as_("mallory")).json()["rules"] == []

    assert stored(http, user, said(user, "my code is 7788", [user]))["content"].endswith(
        "[forgotten]"
    )
    lifted = http.delete(f"/v1/forget-rules/{rule['rule_id']}", headers=as_(user))
    assert lifted.status_code == 200, lifted.text
    assert lifted.json()["status"] == "lifted"
    assert stored(http, user, said(user, "my code is 7788", [user]))["content"].endswith("7788")


def test_a_pattern_masks_the_subjects_numbers_whole_word(http: httpx.Client) -> None:
    user = f"fay-{uuid.uuid4().hex[:6]}"
    forget(http, user, {"kind": "pattern", "pattern": "###-####"}).raise_for_status()
    record = stored(http, user, said(user, "call 555-0142 or 1555-01420", [user]))
    assert record["content"] == f"{user} says call [forgotten] or 1555-01420"
    other = f"gus-{uuid.uuid4().hex[:6]}"
    assert "555-0142" in stored(http, other, said(other, "call 555-0142", [other]))["content"]


def test_an_officer_erases_by_key_what_the_officer_cannot_see(http: httpx.Client) -> None:
    key = f"safe.number.{uuid.uuid4().hex[:6]}"
    people = [f"h{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    ids = [
        stored(http, p, said(p, f"the temporary safe number is 90{i}1", [p], key=key))["id"]
        for i, p in enumerate(people)
    ]
    kept = stored(http, people[0], said(people[0], "the safe is in the hall", [people[0]]))
    officer = as_("dpo", roles="data_protection")
    assert '"items":[]' in http.post(
        "/v1/recall", json={"query": "temporary safe number"}, headers=officer
    ).text.replace(" ", "")

    started = http.post("/v1/erasures", json={"kind": "proposition", "key": key}, headers=officer)
    assert started.status_code == 202, started.text
    report = started.json()
    assert (report["status"], report["erased"], report["kept"]) == ("done", 3, 0)
    assert report["unrestricted"] is True
    assert "safe number" not in started.text
    for person, record in zip(people, ids, strict=True):
        assert http.get(f"/v1/memories/{record}", headers=as_(person)).status_code == 404
    assert http.get(f"/v1/memories/{kept['id']}", headers=as_(people[0])).status_code == 200


def test_an_officer_erases_by_query_within_the_bound(http: httpx.Client) -> None:
    person = f"ivy-{uuid.uuid4().hex[:6]}"
    text = f"temporary numbers {uuid.uuid4().hex[:8]} for the locker"
    target = stored(http, person, said(person, text, [person]))
    unrelated = stored(http, person, said(person, "the garden needs watering", [person]))
    officer = as_("dpo", roles="data_protection")
    body = {"kind": "query", "query": text, "min_score": 0.6, "max_records": 5}
    report = http.post("/v1/erasures", json=body, headers=officer)
    assert report.status_code == 202, report.text
    assert report.json()["erased"] == 1
    assert http.get(f"/v1/memories/{target['id']}", headers=as_(person)).status_code == 404
    assert http.get(f"/v1/memories/{unrelated['id']}", headers=as_(person)).status_code == 200
    too_many = {**body, "max_records": 1001}
    assert http.post("/v1/erasures", json=too_many, headers=officer).status_code == 422


def test_anyone_erases_by_content_only_their_own_records(http: httpx.Client) -> None:
    key = f"plans.{uuid.uuid4().hex[:6]}"
    owner, reader = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("jo", "kim"))
    mine = stored(http, owner, said(owner, "we leave at six", [owner, reader], key=key))
    shared = stored(http, reader, said(reader, "we leave at seven", [owner, reader], key=key))
    hidden = stored(http, reader, said(reader, "I might not come", [reader], key=key))
    started = http.post(
        "/v1/erasures", json={"kind": "proposition", "key": key}, headers=as_(owner)
    )
    assert started.status_code == 202, started.text
    report = started.json()
    # What the owner may see: their own (erased) and the reader's shared one (kept);
    # the reader's private one is neither counted nor touched.
    assert (report["erased"], report["kept"], report["examined"]) == (1, 1, 2)
    assert report["kept_because"] == {"not_holder_or_writer": 1}
    assert report["unrestricted"] is False
    assert http.get(f"/v1/memories/{mine['id']}", headers=as_(owner)).status_code == 404
    for record in (shared, hidden):
        assert http.get(f"/v1/memories/{record['id']}", headers=as_(reader)).status_code == 200


def test_an_agent_never_keeps_a_value_through_mcp(http: httpx.Client) -> None:
    user = f"lea-{uuid.uuid4().hex[:6]}"
    stored(http, user, said(user, "the alarm code is 3141", [user]))
    made = mcp_call(http, user, "never_keep", {"kind": "value", "value": "3141"})
    assert made.get("isError") is not True, made
    assert made["structuredContent"]["erasure"]["erased"] == 1
    assert "3141" not in json.dumps(made)
    rule_id = made["structuredContent"]["rule"]["rule_id"]
    assert stored(http, user, said(user, "3141 again", [user]))["content"].endswith(
        "[forgotten] again"
    )
    refused = mcp_call(http, "mallory", "lift_forget_rule", {"rule_id": rule_id})
    assert refused["structuredContent"]["error"] == "not_found"
    lifted = mcp_call(http, user, "lift_forget_rule", {"rule_id": rule_id})
    assert lifted["structuredContent"]["status"] == "lifted"


def test_a_stack_document_carrying_the_value_is_refused(http: httpx.Client) -> None:
    """A document through the Qdrant dialect comes with the stack's own vector, made
    from the text as sent: it cannot be masked, so it is refused."""
    user = f"max-{uuid.uuid4().hex[:6]}"
    collection = f"kb_{uuid.uuid4().hex[:6]}"
    forget(http, user, {"kind": "value", "value": "6029"}).raise_for_status()
    created = http.put(
        f"/collections/{collection}",
        json={"vectors": {"size": 4, "distance": "Cosine"}},
        headers=as_(user),
    )
    assert created.status_code == 200, created.text
    point = {
        "id": 1,
        "vector": [0.1, 0.2, 0.3, 0.4],
        "payload": {
            "page_content": "the gate code is 6029",
            "metadata": {"audience": [user], "source": "gate.md"},
        },
    }
    refused = http.put(
        f"/collections/{collection}/points", json={"points": [point]}, headers=as_(user)
    )
    assert refused.status_code in (400, 422), refused.text
    assert "forgotten" in refused.text
    assert "6029" not in refused.text
    point["payload"] = {
        "page_content": "the gate is green",
        "metadata": {"audience": [user], "source": "gate.md"},
    }
    fine = http.put(
        f"/collections/{collection}/points", json={"points": [point]}, headers=as_(user)
    )
    assert fine.status_code == 200, fine.text


@pytest.mark.parametrize("with_redis", [False, True], ids=["file", "redis"])
def test_a_rule_stands_across_restarts_and_replicas(
    tmp_path: Path, request: pytest.FixtureRequest, with_redis: bool
) -> None:
    """Set on one sidecar, the rule holds on the next one started on the same data
    directory (the file store) or on another replica of the same Redis (a data
    directory of its own); lifted on one, it is lifted on the other."""
    env = {"WHOSE_REDIS_URL": request.getfixturevalue("redis_url")} if with_redis else {}
    user = f"nia-{uuid.uuid4().hex[:6]}"
    first, second = tmp_path / "one", (tmp_path / "two" if with_redis else tmp_path / "one")
    base, process = start_sidecar(first, env=env)
    try:
        with httpx.Client(base_url=base, timeout=60) as http:
            rule = forget(http, user, {"kind": "value", "value": "8080-42"}).json()["rule"]
    finally:
        stop(process)
    base, process = start_sidecar(second, env=env)
    try:
        with httpx.Client(base_url=base, timeout=60) as http:
            masked = stored(http, user, said(user, "the tag is 8080-42", [user]))
            assert masked["content"].endswith("[forgotten]")
            listed = http.get("/v1/forget-rules", headers=as_(user)).json()["rules"]
            assert [r["rule_id"] for r in listed] == [rule["rule_id"]]
            lifted = http.delete(f"/v1/forget-rules/{rule['rule_id']}", headers=as_(user))
            assert lifted.status_code == 200, lifted.text
            kept = stored(http, user, said(user, "the tag is 8080-42", [user]))
            assert kept["content"].endswith("8080-42")
    finally:
        stop(process)
    if with_redis:
        import redis

        client = redis.Redis.from_url(env["WHOSE_REDIS_URL"])
        values = b"".join(
            v if isinstance(v, bytes) else str(v).encode()
            for key in client.scan_iter("whose:forget:*")
            if client.type(key) == b"hash"
            for v in client.hvals(key)
        )
        client.close()
        assert rule["rule_id"].encode() in values


def test_the_bound_on_rules_is_the_setters_own(tmp_path: Path) -> None:
    """The rules one person may have set are bounded, not the tenant's: a bound on the
    tenant's count would refuse bob once alice had set enough, telling him how many rules
    she set, which he may not list. Bob's answers are the same whatever alice set."""
    bound = {"WHOSE_FORGET_RULES_PER_SETTER": "2"}

    def bobs_answers(alices_rules: int) -> list[tuple[int, Any]]:
        base, process = start_sidecar(tmp_path / f"alice-set-{alices_rules}", env=bound)
        try:
            with httpx.Client(base_url=base, timeout=60) as http:
                for n in range(alices_rules):
                    made = forget(http, "alice", {"kind": "value", "value": f"alice-{n}"})
                    assert made.status_code == 201, made.text
                answers = []
                for value in ("bob-0", "bob-1", "bob-2"):
                    answer = forget(http, "bob", {"kind": "value", "value": value})
                    body = answer.json()
                    told = body["reasons"] if "reasons" in body else body["rule"]["kind"]
                    answers.append((answer.status_code, told))
                listed = http.get("/v1/forget-rules", headers=as_("bob")).json()["rules"]
                answers.append((len(listed), sorted(r["value_length"] for r in listed)))
                return answers
        finally:
            stop(process)

    alone = bobs_answers(0)
    assert [status for status, _ in alone[:3]] == [201, 201, 422]
    assert alone[2][1] == ["forget_rules_per_setter:2: lift one first"]
    assert bobs_answers(2) == alone
