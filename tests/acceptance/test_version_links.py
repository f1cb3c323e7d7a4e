"""Version links name other records: a version the asker may not see is never named,
on any read path. A chain is one holder's views told to one audience, so a version
told to fewer people is a chain of its own and never sits between versions others
may see; searches keep links only among their own results, reads by id decide the
rest."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sidecar.embed.hashing import HashingEmbedder
from tests.acceptance.story import fresh_key, recall, said_by, stored
from tests.conftest import as_

POINTS = "/collections/whose_memories/points"


@pytest.fixture
def chain(http: httpx.Client) -> dict[str, dict[str, Any]]:
    """alice's three views of one proposition; bob may read the first and the last."""
    key = fresh_key()

    def version(day: str, audience: list[str]) -> dict[str, Any]:
        body = said_by(
            "alice",
            f"session-{day}",
            proposition={"text": f"the launch is October {day}", "key": key, "value": day},
            audience=audience,
            valid_at=f"2026-10-{day}T09:00:00Z",
        )
        [record] = stored(http, "alice", body)
        return record

    return {
        "v1": version("01", ["alice", "bob"]),
        "v2": version("02", ["alice"]),
        "v3": version("03", ["alice", "bob"]),
    }


def bobs_views(http: httpx.Client, chain: dict[str, dict[str, Any]]) -> dict[str, httpx.Response]:
    v1, v3 = chain["v1"], chain["v3"]
    key = v1["proposition"]["key"]
    bob = as_("bob")
    by_filter = {"filter": {"must": [{"key": "proposition.key", "match": {"value": key}}]}}
    vector = HashingEmbedder(384).embed("the launch is October")
    return {
        "recall": recall(http, "bob", query="the launch", about=key, include_history=True),
        "get v1": http.get(f"/v1/memories/{v1['id']}", headers=bob),
        "get v3": http.get(f"/v1/memories/{v3['id']}", headers=bob),
        "history": http.get(f"/v1/memories/{v3['id']}/history", headers=bob),
        "propositions": http.get(f"/v1/propositions/{key}", headers=bob),
        "proxy query": http.post(
            f"{POINTS}/query", json={"query": vector, "with_payload": True} | by_filter, headers=bob
        ),
        "proxy scroll": http.post(
            f"{POINTS}/scroll", json=by_filter | {"with_payload": True}, headers=bob
        ),
        "proxy retrieve": http.post(
            POINTS, json={"ids": [v1["id"], v3["id"]], "with_payload": True}, headers=bob
        ),
        "proxy get": http.get(f"{POINTS}/{v1['id']}", headers=bob),
    }


def test_a_withheld_versions_id_appears_on_no_read_path(
    http: httpx.Client, chain: dict[str, dict[str, Any]]
) -> None:
    for path, response in bobs_views(http, chain).items():
        assert response.status_code == 200, (path, response.text)
        # Each path shows bob a version next to the withheld one...
        assert chain["v1"]["id"] in response.text or chain["v3"]["id"] in response.text, path
        # ...and nothing names the withheld one.
        assert chain["v2"]["id"] not in response.text, path
    # What bob may see says that his version was replaced, when, and by what he may see.
    v1 = http.get(f"/v1/memories/{chain['v1']['id']}", headers=as_("bob")).json()
    assert v1["item"]["status"] == "superseded"
    assert v1["record"]["invalid_at"] == "2026-10-03T09:00:00Z"
    assert v1["record"]["superseded_by"] == chain["v3"]["id"]


def test_the_owner_sees_each_audience_as_its_own_chain(
    http: httpx.Client, chain: dict[str, dict[str, Any]]
) -> None:
    v1, v2, v3 = chain["v1"], chain["v2"], chain["v3"]
    history = http.get(f"/v1/memories/{v3['id']}/history", headers=as_("alice")).json()
    links = [(i["id"], i.get("supersedes"), i.get("superseded_by")) for i in history["items"]]
    assert links == [(v1["id"], None, v3["id"]), (v3["id"], v1["id"], None)]
    private = http.get(f"/v1/memories/{v2['id']}/history", headers=as_("alice")).json()
    assert [(i["id"], i.get("supersedes")) for i in private["items"]] == [(v2["id"], None)]
    # A search shows links only among its own results (no extra decisions on the hot
    # path); with the history asked for, the chain is in the answer and so are its links.
    # As a mind, alice holds one view: her latest, whichever audience it was told to
    # (v2 is superseded in her mind, though still current in its own chain).
    key = v1["proposition"]["key"]
    now = recall(http, "alice", query="the launch", about=key).json()
    assert {(i["id"], i.get("supersedes")) for i in now["items"]} == {(v3["id"], None)}
    everything = recall(http, "alice", query="the launch", about=key, include_history=True)
    linked = {i["id"]: i.get("supersedes") for i in everything.json()["items"]}
    assert linked == {v1["id"]: None, v2["id"]: None, v3["id"]: v1["id"]}
    status = {i["id"]: i["status"] for i in everything.json()["items"]}
    assert status == {v1["id"]: "superseded", v2["id"]: "superseded", v3["id"]: "current"}
    # A read by id decides the versions its links name.
    got = http.get(f"/v1/memories/{v3['id']}", headers=as_("alice")).json()
    assert got["record"]["supersedes"] == v1["id"]
