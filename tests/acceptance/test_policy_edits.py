"""A security team's edit decides every record, on the sidecar's defaults.

An age rule, written the way docs/policies.md invites (a denial of its own), withholds
records that applied more than 100 days before the instant asked about. Records a
hundred and more days apart differ only in `valid_at`, which the shipped policy only
sets against the instant asked about: a sidecar that shared one decision across both
would serve the old record on the young one's allow (the outside review of issue 35 found
exactly this form escaping the text guard). What the compiled policy reads keeps
`valid_at` exact, and the arithmetic on the instant asked about (it may flip at any
moment) caches nothing; the sidecar says so at start, in its log and on
whose_decision_sharing. GET, recall and explain agree, asked once and again.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.bundles import policy_copy
from tests.conftest import as_, metric, start_sidecar, stop

AGE_RULE = """
# METADATA
# description: claims that applied more than 100 days before the instant asked about.
too_old[record.id] contains "older_than_100_days" if {
\tsome record in disclosure.records
\ttime.parse_rfc3339_ns(record.valid_at) < time.parse_rfc3339_ns(disclosure.as_of) - limit_ns
}

limit_ns := ((100 * 24) * 3600) * 1000000000
"""


def _record(days_ago: int, n: int) -> dict[str, object]:
    at = datetime.now(UTC) - timedelta(days=days_ago)
    return {
        "content": f"Alice says the launch is October {n}",
        "observer_id": "alice",
        "source_id": "launch-sync",
        "source": {"kind": "conversation", "speaker": "alice"},
        "modality": "asserted",
        "proposition": {"text": f"launch {n}", "key": f"launch-{n}", "value": n},
        "audience": ["alice", "bob"],
        "valid_at": at.isoformat().replace("+00:00", "Z"),
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("edited")


@pytest.fixture(scope="module")
def edited(folder: Path) -> Iterator[str]:
    policy = policy_copy(folder / "rego")
    denials = policy / "whose" / "disclosure" / "denials" / "denials.rego"
    denials.write_text(denials.read_text() + AGE_RULE)
    # An hour-long bucket: were anything cached, the second ask would come from it.
    env = {"WHOSE_POLICY_DIR": str(policy), "WHOSE_CACHE_BUCKET_S": "3600"}
    base, process = start_sidecar(folder / "data", env)
    yield base
    stop(process)


def test_an_age_rule_withholds_the_old_record_whatever_was_decided_before(edited: str) -> None:
    with httpx.Client(base_url=edited, timeout=30) as http:
        written = http.post(
            "/v1/memories", json=[_record(10, 1), _record(200, 2)], headers=as_("alice")
        )
        assert written.status_code == 201, written.text
        young, old = (r["id"] for r in written.json()["records"])
        # Warm the policy (its first answer), then the young record's allow, then the old.
        for _ in range(2):
            assert http.get(f"/v1/memories/{young}", headers=as_("bob")).status_code == 200
            got = http.get(f"/v1/memories/{old}", headers=as_("bob"))
            assert got.status_code == 404, got.text
            recalled = http.post(
                "/v1/recall", json={"query": "launch", "limit": 10}, headers=as_("bob")
            )
            assert recalled.status_code == 200, recalled.text
            assert [i["id"] for i in recalled.json()["items"]] == [young]
        explained = http.post(
            "/v1/explain",
            json={"record_id": old, "asker": "bob", "purpose": "get"},
            headers=as_("admin", roles="policy-admin"),
        )
        assert explained.status_code == 200, explained.text
        assert explained.json()["decision"]["allow"] is False


def test_the_sidecar_says_the_age_rule_caches_nothing(edited: str, folder: Path) -> None:
    said = (folder / "data" / "sidecar.log").read_text()
    assert "not shared and not cached" in said
    assert (
        "the instant asked about is passed to minus (whose/disclosure/denials/denials.rego:" in said
    )
    assert metric(edited, "whose_decision_sharing", mode="uncached") == 1
    assert metric(edited, "whose_decision_sharing", mode="shape") == 0
