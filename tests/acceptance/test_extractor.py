"""The extractor's API: a conversation played into whose as an extractor would post it.

Observations in batches (all or nothing), an extractor's own vector on a claim, a
first-person turn that keeps its meaning when someone else is served it, and the
README's extractor example in a tenant of its own (with the role it needs)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import as_

EXTRACTOR = as_("extractor-bot", tenant="fresh-tenant", roles="extractor")


def turn(speaker: str, text: str, said_at: str, **claim: Any) -> dict[str, Any]:
    return {
        "speaker": speaker,
        "source_id": "conv-26",
        "participants": ["caroline", "melanie"],
        "said_at": said_at,
        "claims": [{"proposition": {"text": text}, **claim}],
    }


def recall(http: httpx.Client, who: str, **body: Any) -> dict[str, Any]:
    response = http.post("/v1/recall", headers=as_(who, tenant="fresh-tenant"), json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_a_batch_of_observations_is_stored_whole_or_not_at_all(http: httpx.Client) -> None:
    batch = [
        turn("caroline", "caroline researched adoption agencies", "2023-05-25T13:14:00Z"),
        turn("melanie", "melanie ran a charity race for mental health", "2023-05-25T13:15:00Z"),
    ]
    stored = http.post("/v1/observations", headers=EXTRACTOR, json=batch)
    assert stored.status_code == 201, stored.text
    assert [r["observer_id"] for r in stored.json()["records"]] == ["caroline", "melanie"]
    # One claim the write policy refuses (a nested view that claims to be knowledge
    # with no evidence from the knower is fine; a group is not someone present): the
    # whole batch is refused, and nothing of it is stored.
    refused = http.post(
        "/v1/observations",
        headers=EXTRACTOR,
        json=[
            turn("caroline", "caroline painted a lake sunrise", "2023-05-26T10:00:00Z"),
            {**turn("melanie", "x", "2023-05-26T10:01:00Z"), "participants": ["group:all"]},
        ],
    )
    assert refused.status_code == 422
    found = recall(http, "caroline", query="lake sunrise painting", search="lexical")
    assert not [i for i in found["items"] if "sunrise" in i["content"]]


def test_a_claim_carries_the_extractors_own_vector(http: httpx.Client) -> None:
    vector = [0.0] * 384
    vector[7] = 1.0
    claim = turn("caroline", "caroline keeps a journal", "2023-06-01T09:00:00Z", vector=vector)
    assert http.post("/v1/observations", headers=EXTRACTOR, json=claim).status_code == 201
    found = recall(http, "melanie", vector=vector, limit=1)
    [item] = found["items"]
    assert "journal" in item["content"]
    assert item["score"] > 0.999


def test_a_first_person_turn_keeps_its_speaker_and_its_date(http: httpx.Client) -> None:
    said = "I went to a LGBTQ support group yesterday and it was so powerful."
    unresolved = http.post(
        "/v1/observations", headers=EXTRACTOR, json=turn("caroline", said, "2023-05-08T13:56:00Z")
    )
    assert unresolved.status_code == 422
    [reason] = [r for r in unresolved.json()["reasons"] if r["type"] == "unresolved_reference"]
    assert "claims" in reason["loc"]
    assert "i, yesterday" in reason["msg"]
    quoted = turn("caroline", said, "2023-05-08T13:56:00Z", quoted=True)
    stored = http.post("/v1/observations", headers=EXTRACTOR, json=quoted)
    assert stored.status_code == 201, stored.text
    # Melanie is served Caroline's words as Caroline's, on the day she said them.
    found = recall(http, "melanie", query="When did Caroline go to the LGBTQ support group?")
    best = found["items"][0]
    assert best["content"].startswith(
        f"caroline said that “{said}” (in caroline's words, said on 8 May 2023)"
    )
    assert best["as_written"] == f"caroline said on 8 May 2023: “{said}”"


def test_the_readme_extractor_example_works_in_a_fresh_tenant(http: httpx.Client) -> None:
    body = {
        "speaker": "alice",
        "source_id": "private-session-42",
        "channel": "dm",
        "participants": ["alice"],
        "said_at": "2026-10-01T09:00:00Z",
        "claims": [
            {
                "proposition": {
                    "text": "the launch is October 17",
                    "key": "launch.date",
                    "value": "2026-10-17",
                },
                "about": "bob",
                "attitude": "knows",
                "hedged": True,
            }
        ],
    }
    without_role = as_("extractor-bot", tenant="another-tenant")
    refused = http.post("/v1/observations", headers=without_role, json=body)
    assert refused.status_code == 422
    # Not alice's words to relay, nor hers to say who was there (issue 35).
    assert set(refused.json()["reasons"][0]["reasons"]) == {
        "writer_not_holder",
        "presence_not_attested",
    }
    stored = http.post("/v1/observations", headers=EXTRACTOR, json=body)
    assert stored.status_code == 201, stored.text
    [record] = stored.json()["records"]
    assert record["content"] == "alice thinks that bob knows that the launch is October 17"
