"""Impact analysis's pure half (policy/impact.py) and the console's escaping, without a
process: what counts as a flip, which rules made it, the bounded examples, a record as
it stood at an instant, and markup in anything the report shows."""

from __future__ import annotations

from datetime import UTC, datetime

from sidecar.http.console import _report
from sidecar.policy.contract import RuleReasons
from sidecar.policy.impact import (
    ImpactSide,
    ImpactWindow,
    Question,
    Skipped,
    Tally,
    as_it_stood,
    differing_rules,
    flip_kind,
    report,
)

AT = datetime(2026, 11, 30, 12, tzinfo=UTC)


def side(
    allow: bool, usable_as: str = "belief", *reasons: str, rule: str = "hearers"
) -> ImpactSide:
    rules = [RuleReasons(rule=rule, reasons=list(reasons))] if reasons else []
    return ImpactSide(
        allow=allow,
        usable_as=usable_as,
        obligations=["attribute", "cite_source"],
        reasons=list(reasons),
        rules=rules,
    )


def question(record: str = "r1", asker: str = "carol", entry: str = "e1") -> Question:
    return Question(
        entry=entry,
        record_id=record,
        asker=asker,
        groups=(),
        roles=(),
        scopes=(),
        audience=(),
        purpose="get",
        now=AT,
        as_of=AT,
        audited_allow=False,
    )


def test_what_is_a_flip() -> None:
    withheld, allowed = side(False, "belief", "audience_excludes:carol"), side(True)
    assert flip_kind(withheld, allowed) == "newly_disclosed"
    assert flip_kind(allowed, withheld) == "newly_withheld"
    assert flip_kind(allowed, side(True, "knowledge")) == "changed_use"
    # Withheld either way, for other reasons: the asker sees no difference.
    assert flip_kind(withheld, side(False, "belief", "scope_not_cleared:carol")) is None
    assert flip_kind(allowed, side(True)) is None


def test_the_rules_that_differ() -> None:
    before = side(False, "belief", "audience_excludes:carol")
    after = side(True)
    assert differing_rules(before, after) == ["hearers"]
    assert differing_rules(before, before) == []


def test_examples_are_bounded_and_disclosures_kept_first() -> None:
    tally = Tally(max_examples=2)
    withheld, allowed = side(False, "belief", "x"), side(True)
    tally.add(question("a"), "s", allowed, withheld)
    tally.add(question("b"), "s", allowed, withheld)
    tally.add(question("c"), "s", withheld, allowed)
    built = report(
        tally,
        tenant="acme",
        window=ImpactWindow(),
        current_revision="r0",
        candidate_revision="r1",
        entries_read=3,
        seconds=1.0,
        truncated=None,
        skipped=Skipped(),
    )
    assert built.flips.newly_withheld == 2
    assert built.flips.newly_disclosed == 1
    assert {f.record_id for f in built.examples} == {"a", "c"}
    # Every flipped record is listed, however few examples are kept.
    assert built.records.newly_withheld == ["a", "b"]
    assert built.by_source[0].key == "s"


def test_a_record_as_it_stood() -> None:
    later = datetime(2026, 12, 1, tzinfo=UTC)
    record = {
        "id": "r1",
        "invalid_at": "2026-12-01T00:00:00Z",
        "superseded_by": "r2",
        "premise_changes": [
            {"premise": "p", "change": "erased", "recorded_at": "2026-12-01T00:00:00Z"}
        ],
    }
    then = as_it_stood(record, AT, {"r2": later})
    assert "superseded_by" not in then
    assert "invalid_at" not in then
    assert "premise_changes" not in then
    # After the successor was written, the record is as the store holds it.
    assert as_it_stood(record, later, {"r2": later}) == record


def test_the_report_page_shows_markup_as_text() -> None:
    tally = Tally(max_examples=5)
    markup = "<script>alert(1)</script>"
    tally.add(question(markup, markup), markup, side(False, "belief", markup), side(True))
    built = report(
        tally,
        tenant="acme",
        window=ImpactWindow(),
        current_revision=markup,
        candidate_revision=None,
        entries_read=1,
        seconds=0.1,
        truncated=None,
        skipped=Skipped(),
    )
    page = _report(built)
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
