"""How a chain closes over erased versions (writes/relink.py), and how lineage marks
a derived record (writes/lineage.py): pure, no store."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sidecar.writes.lineage import marked
from sidecar.writes.relink import neighbours, relink


def chain(n: int) -> dict[str, dict[str, Any]]:
    """v0 -> v1 -> ... -> v(n-1), v(i) valid from day i+1, the last one current."""
    versions: dict[str, dict[str, Any]] = {}
    for i in range(n):
        record: dict[str, Any] = {"id": f"v{i}", "valid_at": f"2026-10-{i + 1:02d}T00:00:00Z"}
        if i > 0:
            record["supersedes"] = f"v{i - 1}"
        if i < n - 1:
            record["superseded_by"] = f"v{i + 1}"
            record["invalid_at"] = f"2026-10-{i + 2:02d}T00:00:00Z"
        versions[record["id"]] = record
    return versions


def applied(versions: dict[str, dict[str, Any]], erased: set[str]) -> dict[str, dict[str, Any]]:
    plan = relink(erased, versions)
    result = {k: dict(v) for k, v in versions.items() if k not in erased}
    for record_id, fields in plan.set.items():
        result[record_id].update(fields)
    for record_id, names in plan.clear.items():
        for name in names:
            result[record_id].pop(name, None)
    return result


def test_erasing_a_middle_version_links_its_neighbours() -> None:
    after = applied(chain(3), {"v1"})
    assert after["v0"]["superseded_by"] == "v2"
    assert after["v0"]["invalid_at"] == after["v2"]["valid_at"]
    assert after["v2"]["supersedes"] == "v0"


def test_erasing_the_current_version_makes_the_one_before_current_again() -> None:
    versions = chain(3)
    plan = relink({"v2"}, versions)
    assert plan.reopened == ["v1"]
    after = applied(versions, {"v2"})
    assert "superseded_by" not in after["v1"]
    assert "invalid_at" not in after["v1"]


def test_erasing_the_first_version_leaves_the_next_first() -> None:
    after = applied(chain(3), {"v0"})
    assert "supersedes" not in after["v1"]
    assert after["v1"]["superseded_by"] == "v2"


def test_a_run_of_erased_versions_is_closed_over_at_once() -> None:
    after = applied(chain(5), {"v1", "v2", "v3"})
    assert after["v0"]["superseded_by"] == "v4"
    assert after["v4"]["supersedes"] == "v0"


def test_a_neighbour_whose_link_names_something_else_is_left_alone() -> None:
    versions = chain(3)
    versions["v0"]["superseded_by"] = "elsewhere"
    plan = relink({"v1"}, versions)
    assert "v0" not in plan.set
    assert "v0" not in plan.clear
    assert plan.set["v2"] == {"supersedes": "v0"}


def test_a_neighbour_not_at_hand_is_taken_as_gone() -> None:
    versions = chain(3)
    del versions["v0"]
    assert neighbours({"v1"}, versions) == {"v0"}
    plan = relink({"v1"}, versions)
    assert plan.clear == {"v2": ["supersedes"]}


@given(st.integers(min_value=1, max_value=8), st.data())
def test_any_erasure_leaves_one_coherent_line(n: int, data: st.DataObject) -> None:
    versions = chain(n)
    erased = set(data.draw(st.sets(st.sampled_from(sorted(versions)))))
    after = applied(versions, erased)
    survivors = [f"v{i}" for i in range(n) if f"v{i}" not in erased]
    assert sorted(after) == sorted(survivors)
    for before, later in itertools.pairwise(survivors):
        assert after[before]["superseded_by"] == later
        assert after[before]["invalid_at"] == after[later]["valid_at"]
        assert after[later]["supersedes"] == before
    if survivors:
        assert "supersedes" not in after[survivors[0]]
        assert "superseded_by" not in after[survivors[-1]]
        assert "invalid_at" not in after[survivors[-1]]


AT = datetime(2026, 10, 9, tzinfo=UTC)


def test_a_derived_record_is_marked_for_its_own_premises_only() -> None:
    summary = {"id": "s1", "provenance": {"derived_from": ["p1", "p2"]}}
    marks = marked(summary, {"p1": "erased", "p9": "erased"}, AT)
    assert marks == [{"premise": "p1", "change": "erased", "recorded_at": "2026-10-09T00:00:00Z"}]


def test_a_mark_is_made_once() -> None:
    summary = {
        "id": "s1",
        "provenance": {"derived_from": ["p1"]},
        "premise_changes": [
            {"premise": "p1", "change": "erased", "recorded_at": "2026-10-01T00:00:00Z"}
        ],
    }
    assert marked(summary, {"p1": "erased"}, AT) is None
    assert marked(summary, {"p1": "superseded"}, AT) is not None
