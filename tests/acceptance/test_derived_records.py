"""A record derived from others may reach no one its premises could not."""

from __future__ import annotations

import uuid

import httpx

from tests.acceptance.story import said_by, stored, write

TEAM = ["group:launch-team"]


def summary(audience: list[str], derived_from: list[str], **extra: object) -> dict[str, object]:
    return (
        said_by(
            "alice",
            "summary-job",
            content="alice's notes say the launch moved",
            audience=audience,
            provenance={"method": "summary", "derived_from": derived_from},
        )
        | extra
    )


def test_summary_within_its_sources_audience_is_stored(http: httpx.Client) -> None:
    [team_note] = stored(http, "alice", said_by("alice", "s1", audience=TEAM))
    [record] = stored(http, "alice", summary(TEAM, [team_note["id"]]))
    assert record["provenance"] == {
        "writer": "alice",
        "method": "summary",
        "derived_from": [team_note["id"]],
    }


def test_summary_of_a_private_note_cannot_go_to_the_team(http: httpx.Client) -> None:
    [team_note] = stored(http, "alice", said_by("alice", "s2", audience=TEAM))
    [private] = stored(http, "alice", said_by("alice", "s3"))
    response = write(http, "alice", summary(TEAM, [team_note["id"], private["id"]]))
    assert response.status_code == 422
    assert response.json()["reasons"][0]["reasons"] == ["derived_audience_wider:group:launch-team"]


def test_summary_keeps_its_sources_scope(http: httpx.Client) -> None:
    [scoped] = stored(
        http, "alice", said_by("alice", "s4", audience=TEAM, access_scope="launch-core")
    )
    dropped = write(http, "alice", summary(TEAM, [scoped["id"]]))
    assert dropped.json()["reasons"][0]["reasons"] == ["derived_scope_wider"]
    kept = write(http, "alice", summary(TEAM, [scoped["id"]], access_scope="launch-core"))
    assert kept.status_code == 201


def test_a_premise_the_writer_cannot_read_looks_like_a_missing_one(http: httpx.Client) -> None:
    [bobs] = stored(http, "bob", said_by("bob", "s5"))
    for premise in (bobs["id"], str(uuid.uuid4())):
        response = write(http, "alice", summary(["alice"], [premise]))
        assert response.status_code == 422
        assert response.json()["reasons"][0]["reasons"] == ["premise_unavailable"]
