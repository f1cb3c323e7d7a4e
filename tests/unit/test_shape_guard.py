"""The shape guard (policy/shape_guard.py): what the policy's text reads is never ignored."""

from __future__ import annotations

import json
import re

from sidecar.policy.local_opa import read_sources
from sidecar.policy.shape import ShapeSpec
from sidecar.policy.shape_guard import check
from tests.conftest import POLICY_DIR


def shipped() -> tuple[ShapeSpec, dict[str, str]]:
    """The shipped policy's declaration and text."""
    sources = read_sources(POLICY_DIR)
    found = re.search(
        r"^shape := (\{.*?\n\})", sources["whose/disclosure/disclosure.rego"], re.M | re.S
    )
    assert found, "the disclosure policy declares its shape"
    # The declaration is JSON but for Rego's trailing commas.
    declared = json.loads(re.sub(r",(\s*[\]}])", r"\1", found.group(1)))
    spec = ShapeSpec.parse(declared)
    assert spec is not None
    return spec, sources


def with_rule(sources: dict[str, str], rule: str) -> dict[str, str]:
    header = "package whose.disclosure.denials\n\nimport data.whose.disclosure\n\n"
    return sources | {"whose/disclosure/denials/added.rego": header + rule}


def test_the_shipped_policy_bears_out_its_declaration() -> None:
    spec, sources = shipped()
    checked = check(spec, sources)
    assert checked.kept == {}
    assert checked.spec == spec


def test_a_rule_reading_an_ignored_field_keeps_it_in_the_shape() -> None:
    spec, sources = shipped()
    low = """low[record.id] contains "low" if {
\tsome record in disclosure.records
\trecord.confidence < 0.5
}
"""
    checked = check(spec, with_rule(sources, low))
    assert set(checked.kept) == {"confidence"}
    assert ("confidence",) not in checked.spec.ignores
    assert ("recorded_at",) in checked.spec.ignores
    # Read by name in an object.get key or a bracket, too.
    for reading in ('object.get(record, "source_id", "") == "x"', 'record["source_id"] == "x"'):
        body = f"\tsome record in disclosure.records\n\t{reading}\n"
        rule = f'x[record.id] contains "x" if {{\n{body}}}\n'
        assert set(check(spec, with_rule(sources, rule)).kept) == {"source_id"}, reading


def test_a_record_id_read_as_more_than_its_key_keeps_it() -> None:
    spec, sources = shipped()
    blocked = """blocked[record.id] contains "blocked" if {
\tsome record in disclosure.records
\trecord.id in data.blocklist
}
"""
    checked = check(spec, with_rule(sources, blocked))
    assert set(checked.kept) == {"id"}
    assert ("id",) not in checked.spec.ignores


def test_an_instant_used_in_arithmetic_is_kept_exact() -> None:
    spec, sources = shipped()
    old = """old[record.id] contains "old" if {
\tsome record in disclosure.records
\ttime.parse_rfc3339_ns(input.now) - time.parse_rfc3339_ns(record.valid_at) > 86400000000000
}
"""
    checked = check(spec, with_rule(sources, old))
    assert set(checked.kept) == {"valid_at"}
    assert ("valid_at",) not in checked.spec.instants
    assert ("invalid_at",) in checked.spec.instants


def test_only_what_the_disclosure_rules_reach_counts() -> None:
    spec, sources = shipped()
    # retention.rego reads recorded_at and source_id, subjects.rego a record's id:
    # no disclosure rule reaches them.
    assert "record.recorded_at" in sources["whose/retention/retention.rego"]
    assert "record.id in" in sources["whose/lib/subjects/subjects.rego"]
    # A comment is no read.
    commented = "# record.confidence is not read here\nnothing := true\n"
    assert check(spec, with_rule(sources, commented)).kept == {}


def test_a_record_read_whole_or_by_computed_name_leaves_nothing_ignored() -> None:
    spec, sources = shipped()
    for reading in (
        "some path, value in walk(record)",
        "count(object.keys(record)) > 12",
        'some name in data.whose.config.private\n\tobject.get(record, name, "") != ""',
        'some name in data.whose.config.private\n\trecord[name] != ""',
    ):
        body = f"\tsome record in disclosure.records\n\t{reading}\n"
        rule = f'x[record.id] contains "x" if {{\n{body}}}\n'
        checked = check(spec, with_rule(sources, rule))
        assert checked.spec == ShapeSpec((), ()), reading
        assert "id" in checked.kept, reading
