"""Policy edits a security team writes, drawn by hypothesis (tests/oracle/test_readset.py).

Each edit is a new denial of whose.disclosure.denials (docs/policies.md, "Changing a
rule") in a file of its own, and the helper packages and data documents it needs:

- denials over record fields the shipped policy never reads (ids, confidence, source
  ids, storage times, derivations, premises), the fields twins differ in;
- helpers in other packages, reached through a parent import (`import data.whose.lib`,
  `lib.q.low(r)`), a child import, a full reference, and from outside `whose.`, with
  else chains and comprehensions inside;
- arithmetic on instants (an age: `parse(valid_at) < parse(as_of) - N`,
  `as_of_ns - parse(valid_at) > N`), times set against each other, against a constant,
  against the text of the instant asked about, or directly against it (a time the
  cache does not know of: recorded_at);
- data documents looked up by a record's field;
- `with` replacing config or the instant asked about for one expression;
- forms no bound holds for (the record walked, marshalled, read by a computed name, its
  id read): the sidecar then decides each record alone, and must still be right.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import strategies as st

DAY_NS = 86_400 * 10**9
# Ages: a second, a day, and long enough to straddle the worlds' times from the clocks.
AGES_NS = [10**9, DAY_NS, 30 * DAY_NS, 300 * DAY_NS]
HEADER = "package whose.disclosure.denials\n\nimport data.whose.disclosure\n"


@dataclass(frozen=True)
class Edit:
    """Files to add to the policy directory (path -> Rego or JSON)."""

    files: tuple[tuple[str, str], ...]
    what: str


def _denial(n: int, body: str, imports: str = "", rest: str = "") -> tuple[str, str]:
    text = (
        f"{HEADER}{imports}\n"
        f'edit{n}[record.id] contains "edit{n}" if {{\n'
        f"\tsome record in disclosure.records\n"
        + "".join(f"\t{line}\n" for line in body.strip().splitlines())
        + "}\n"
        + rest
    )
    return (f"whose/disclosure/edit{n}.rego", text)


FIELD_TESTS = [
    "record.confidence < 0.5",
    'record.source_id == "src-1"',
    'record.proposition.key == "k1"',
    'record.provenance.writer == "relay"',
    "count(record.provenance.derived_from) > 0",
    'some change in record.premise_changes\nchange.premise < "8"',
    'record.recorded_at > "2026-02-01"',
    'record.observed_attitude == "believes"',
    "not record.supersedes\nrecord.confidence > 0.5",
    'sprintf("%v", [record.confidence]) == "0.3"',
]

HELPERS = {
    "plain": "low(r) if r.confidence < 0.5\n",
    "else": (
        'grade(r) := "low" if {\n\tr.confidence < 0.5\n} else := "mid" if {\n'
        '\tr.source_id == "src-1"\n} else := "ok"\n\nlow(r) if grade(r) != "ok"\n'
    ),
    "comprehension": (
        'low(r) if {\n\tfound := [x | some x in [r.source_id, r.proposition.key]; x == "src-2"]\n'
        "\tcount(found) > 0\n}\n"
    ),
    "set_rule": (
        # A rule, not a function: the records it names, looked up by id.
        "import data.whose.disclosure\n\n"
        "weak contains r.id if {\n\tsome r in disclosure.records\n\tr.confidence < 0.5\n}\n\n"
        "low(r) if r.id in weak\n"
    ),
}


@st.composite
def field_denials(draw: st.DrawFn, n: int) -> Edit:
    test = draw(st.sampled_from(FIELD_TESTS))
    return Edit((_denial(n, test),), f"field: {test!r}")


@st.composite
def helper_denials(draw: st.DrawFn, n: int) -> Edit:
    helper = draw(st.sampled_from(sorted(HELPERS)))
    route = draw(st.sampled_from(["parent", "child", "full", "outside"]))
    if route == "outside":
        package, folder = f"acme.q{n}", f"acme/q{n}"
    else:
        package, folder = f"whose.lib.q{n}", f"whose/lib/q{n}"
    imports, call = {
        "parent": ("import data.whose.lib\n", f"lib.q{n}.low(record)"),
        "child": (f"import data.whose.lib.q{n}\n", f"q{n}.low(record)"),
        "full": ("", f"data.whose.lib.q{n}.low(record)"),
        "outside": (f"import data.acme.q{n}\n", f"q{n}.low(record)"),
    }[route]
    helper_file = (f"{folder}/q.rego", f"package {package}\n\n{HELPERS[helper]}")
    return Edit((_denial(n, call, imports), helper_file), f"helper: {helper} by {route}")


@st.composite
def time_denials(draw: st.DrawFn, n: int) -> Edit:
    field = draw(st.sampled_from(["valid_at", "recorded_at", "invalid_at"]))
    age = draw(st.sampled_from(AGES_NS))
    t = f"time.parse_rfc3339_ns(record.{field})"
    body = draw(
        st.sampled_from(
            [
                f"{t} < time.parse_rfc3339_ns(disclosure.as_of) - {age}",
                f"disclosure.as_of_ns - {t} > {age}",
                f"{t} + {age} < disclosure.as_of_ns",
                f"{t} > disclosure.as_of_ns",
                f"{t} < time.parse_rfc3339_ns(input.now)",
                f"{t} > time.parse_rfc3339_ns(record.valid_at)",
                f'{t} < time.parse_rfc3339_ns("2026-02-01T00:00:00Z")',
                f"record.{field} < disclosure.as_of",
                "some e in record.evidence\n"
                f"time.parse_rfc3339_ns(e.at) < disclosure.as_of_ns - {age}",
                f"age_ns := disclosure.as_of_ns - {t}\nage_ns > {age}",
            ]
        )
    )
    return Edit((_denial(n, body),), f"time: {body!r}")


@st.composite
def data_denials(draw: st.DrawFn, n: int) -> Edit:
    lists = {"sources": ["src-1"], "flags": {"src-2": True}, "keys": {"k0": "hidden"}}
    data = (f"acme/lists{n}/data.json", json.dumps(lists))
    ref = f"data.acme.lists{n}"
    body = draw(
        st.sampled_from(
            [
                f"record.source_id in {ref}.sources",
                f"{ref}.flags[record.source_id]",
                f"object.get({ref}.flags, record.source_id, false)",
                f'{ref}.keys[record.proposition.key] == "hidden"',
            ]
        )
    )
    return Edit((_denial(n, body), data), f"data: {body!r}")


@st.composite
def with_denials(draw: st.DrawFn, n: int) -> Edit:
    body = draw(
        st.sampled_from(
            [
                "data.whose.lib.lineage.withheld(record)"
                ' with data.whose.config.stale.withhold as ["erased", "withdrawn"]',
                'not disclosure.applies(record) with input.as_of as "2026-02-01T00:00:00Z"',
                "record.confidence < data.whose.config.floor with data.whose.config.floor as 0.5",
                'not data.whose.lib.validity.current_at(record, "2026-02-01T00:00:00Z")',
            ]
        )
    )
    return Edit((_denial(n, body),), f"with: {body!r}")


@st.composite
def unbounded_denials(draw: st.DrawFn, n: int) -> Edit:
    body = draw(
        st.sampled_from(
            [
                'walk(record, [_, v])\nv == "src-1"',
                'contains(json.marshal(record), "src-2")',
                'some k in ["source_id", "observer_id"]\nrecord[k] == "src-1"',
                'startswith(record.id, "0")',
                "count(object.keys(record)) > 14",
            ]
        )
    )
    return Edit((_denial(n, body),), f"unbounded: {body!r}")


KINDS = [field_denials, helper_denials, time_denials, data_denials, with_denials]


@st.composite
def policy_edits(draw: st.DrawFn) -> tuple[Edit, ...]:
    """One to three edits; now and then one no bound holds for."""
    count = draw(st.integers(1, 3))
    kinds = [*KINDS, unbounded_denials] if draw(st.integers(0, 5)) == 0 else KINDS
    return tuple(draw(draw(st.sampled_from(kinds))(n)) for n in range(count))
