"""Grants through a served sidecar, on both store backends: `/v1/grants`, the MCP
tools `grant_access`, `list_grants` and `revoke_access`, and the Python client. A
grant lets its reader recall the subject's records of its categories already stored,
and nothing else; a revocation takes it back on the next recall; explain applies
grants as a read does; bad input is a 4xx with reasons, and nothing is granted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sidecar.client import DevIdentity, WhoseClient
from sidecar.errors import ConsentRefused, NotFound
from tests.conftest import as_, start_sidecar, stop
from tests.factories import mcp_call


@pytest.fixture(scope="module")
def base(sidecar_on: str) -> str:
    return sidecar_on


@pytest.fixture
def http(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=30) as client:
        yield client


def note(http: httpx.Client, who: str, text: str, categories: list[str] | None) -> str:
    body: dict[str, Any] = {
        "content": f"{who} says {text}",
        "proposition": {"text": text},
        "observer_id": who,
        "source_id": f"{who}-{uuid.uuid4().hex[:8]}",
        "source": {"kind": "conversation", "speaker": who},
        "modality": "believed",
        "audience": [who],
    }
    if categories is not None:
        body["categories"] = categories
    response = http.post("/v1/memories", json=body, headers=as_(who))
    assert response.status_code == 201, response.text
    return str(response.json()["records"][0]["id"])


def recalled(http: httpx.Client, who: str, query: str) -> set[str]:
    response = http.post("/v1/recall", json={"query": query, "limit": 20}, headers=as_(who))
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()["items"]}


def test_a_grant_over_http_and_its_revocation(http: httpx.Client) -> None:
    subject = f"pat-{uuid.uuid4().hex[:6]}"
    times = note(http, subject, "the dentist appointment is Thursday at 10", ["appointments"])
    clinical = note(http, subject, "the dentist appointment is a root canal", ["clinical"])
    assert recalled(http, "sam", "dentist appointment") & {times, clinical} == set()
    given = http.post(
        "/v1/grants",
        json={"reader": "sam", "categories": ["appointments"], "until": "2199-01-01T00:00:00Z"},
        headers=as_(subject),
    )
    assert given.status_code == 201, given.text
    grant = given.json()
    assert (grant["subject"], grant["reader"], grant["granted_by"]) == (subject, "sam", subject)
    assert recalled(http, "sam", "dentist appointment") & {times, clinical} == {times}
    # Listed to its parties only.
    for who, count in ((subject, 1), ("sam", 1), ("carol", 0)):
        listed = http.get("/v1/grants", headers=as_(who)).json()["grants"]
        assert len([g for g in listed if g["grant_id"] == grant["grant_id"]]) == count
    assert http.delete(f"/v1/grants/{grant['grant_id']}", headers=as_("carol")).status_code == 404
    refused = http.delete(f"/v1/grants/{grant['grant_id']}", headers=as_("sam"))
    assert refused.status_code == 403
    assert refused.json() == {"error": "consent_refused", "reasons": ["not_subject_or_agent"]}
    revoked = http.delete(f"/v1/grants/{grant['grant_id']}", headers=as_(subject))
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_by"] == subject
    assert recalled(http, "sam", "dentist appointment") & {times, clinical} == set()
    assert http.delete(f"/v1/grants/{grant['grant_id']}", headers=as_(subject)).status_code == 404


def test_explain_applies_grants_as_a_read_does(http: httpx.Client) -> None:
    subject = f"pat-{uuid.uuid4().hex[:6]}"
    times = note(http, subject, "the physio is on Monday", ["appointments"])
    ask = {"asker": "sam", "record_id": times}
    admin = as_("pol", roles="policy-admin")
    assert http.post("/v1/explain", json=ask, headers=admin).json()["decision"]["allow"] is False
    given = http.post(
        "/v1/grants", json={"reader": "sam", "categories": ["appointments"]}, headers=as_(subject)
    )
    assert given.status_code == 201, given.text
    explained = http.post("/v1/explain", json=ask, headers=admin).json()
    assert explained["decision"]["allow"] is True
    assert [g["id"] for g in explained["input"]["grants"]] == [given.json()["grant_id"]]


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"reader": "sam", "categories": []}, 422, "invalid_request"),
        ({"reader": "sam", "categories": ["Not A Name"]}, 422, "invalid_request"),
        ({"reader": "sam", "categories": ["appointments"], "extra": 1}, 422, "invalid_request"),
        ({"reader": "sam", "categories": ["pin"]}, 403, "consent_refused"),
        (
            {"reader": "sam", "categories": ["appointments"], "subject": "alice"},
            403,
            "consent_refused",
        ),
        (
            {"reader": "sam", "categories": ["appointments"], "until": "2000-01-01T00:00:00Z"},
            403,
            "consent_refused",
        ),
        ({"reader": "pat", "categories": ["appointments"]}, 403, "consent_refused"),
    ],
)
def test_bad_grants_are_refused_with_reasons_and_nothing_granted(
    http: httpx.Client, body: dict[str, Any], status: int, error: str
) -> None:
    before = http.get("/v1/grants", headers=as_("pat")).json()
    answer = http.post("/v1/grants", json=body, headers=as_("pat"))
    assert answer.status_code == status, answer.text
    assert answer.json()["error"] == error
    assert answer.json()["reasons"]
    assert http.get("/v1/grants", headers=as_("pat")).json() == before


def test_an_agent_grants_lists_and_revokes_through_mcp(http: httpx.Client) -> None:
    subject = f"kim-{uuid.uuid4().hex[:6]}"
    times = note(http, subject, "the school pickup is at 3", ["school"])
    given = mcp_call(http, subject, "grant_access", {"reader": "lee", "categories": ["school"]})
    assert given.get("isError") is not True, given
    grant_id = given["structuredContent"]["grant_id"]
    assert given["content"][0]["text"].startswith(f"Granted: lee may see {subject}'s school")
    assert times in recalled(http, "lee", "school pickup")
    listed = mcp_call(http, "lee", "list_grants", {})
    assert [g["grant_id"] for g in listed["structuredContent"]["grants"]] == [grant_id]
    refused = mcp_call(
        http, "lee", "grant_access", {"reader": "lee", "categories": ["school"], "subject": subject}
    )
    assert refused["structuredContent"]["error"] == "consent_refused"
    revoked = mcp_call(http, subject, "revoke_access", {"grant_id": grant_id})
    assert revoked["content"][0]["text"].startswith("Revoked:")
    assert times not in recalled(http, "lee", "school pickup")


def test_the_python_client_grants_and_revokes(base: str, http: httpx.Client) -> None:
    subject = f"ola-{uuid.uuid4().hex[:6]}"
    times = note(http, subject, "the vet appointment is at noon", ["appointments"])
    with WhoseClient(base, dev=DevIdentity(subject, "acme")) as owner:
        grant = owner.grant({"reader": "ida", "categories": ["appointments"]})
        assert [g.grant_id for g in owner.grants().grants] == [grant.grant_id]
        with WhoseClient(base, dev=DevIdentity("ida", "acme")) as reader:
            assert times in {str(i.id) for i in reader.recall("vet appointment").items}
            with pytest.raises(ConsentRefused):
                reader.revoke_grant(grant.grant_id)
            owner.revoke_grant(grant.grant_id)
            assert times not in {str(i.id) for i in reader.recall("vet appointment").items}
        with pytest.raises(NotFound):
            owner.revoke_grant(grant.grant_id)


def test_one_acting_for_a_subject_is_bounded_by_the_grants_they_gave(
    tmp_path: Path,
) -> None:
    """Someone acting for the subject (`config.consent.act_for_roles`) may not list the
    grants the subject gave, so their bound does not count them: their answers are the
    same whether the subject gave grants or not. The subject's own bound counts all."""
    bound = {"WHOSE_GRANTS_PER_SUBJECT": "1"}
    officer = {"roles": "data_protection"}

    def answers(subject_gave: bool) -> list[tuple[int, Any]]:
        base, process = start_sidecar(tmp_path / f"gave-{subject_gave}", env=bound)
        try:
            with httpx.Client(base_url=base, timeout=30) as http:
                if subject_gave:
                    own = http.post(
                        "/v1/grants",
                        json={"reader": "sam", "categories": ["appointments"]},
                        headers=as_("pat"),
                    )
                    assert own.status_code == 201, own.text
                told = []
                for reader in ("ray", "roy"):
                    given = http.post(
                        "/v1/grants",
                        json={"subject": "pat", "reader": reader, "categories": ["clinical"]},
                        headers=as_("dora", **officer),
                    )
                    body = given.json()
                    told.append((given.status_code, body.get("reasons") or body["reader"]))
                listed = http.get("/v1/grants", headers=as_("dora", **officer)).json()
                told.append((len(listed["grants"]), sorted(g["reader"] for g in listed["grants"])))
                return told
        finally:
            stop(process)

    alone = answers(subject_gave=False)
    assert alone[0] == (201, "ray")
    assert alone[1] == (422, ["grants_per_subject:1: revoke one first"])
    assert answers(subject_gave=True) == alone
