"""Every reason code the policies can give is asserted by an `opa test` case, and
the policy coverage is reported in the test output.

The reasons are read from the policies' syntax tree (`opa parse`), not grepped:
every string (or `sprintf` prefix) that a denial produces: the rules of package
`whose.disclosure.denials` (one reason per head), the write policy's `*_denials`, the
visibility library's `causes`, and `notes`.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import OPA_BINARY, OPA_TEST_TIMEOUT, REPORT

REGO = Path(__file__).resolve().parents[2] / "rego"


def _policies() -> list[Path]:
    return sorted(p for p in REGO.rglob("*.rego") if not p.name.endswith("_test.rego"))


def _comprehension_heads(term: Any) -> Iterator[Any]:
    """The head terms of every set comprehension inside a term."""
    if isinstance(term, dict):
        if term.get("type") == "setcomprehension":
            yield term["value"]["term"]
        for value in term.values():
            yield from _comprehension_heads(value)
    elif isinstance(term, list):
        for value in term:
            yield from _comprehension_heads(value)


def _reason_of(head: dict[str, Any]) -> str | None:
    if head.get("type") == "string":
        return str(head["value"])
    if head.get("type") == "call":
        function, *args = head["value"]
        if function["value"][0]["value"] == "sprintf" and args[0].get("type") == "string":
            return str(args[0]["value"]).split(":%s")[0]
    return None


def _reasons() -> set[str]:
    found: set[str] = set()
    for path in _policies():
        parsed = subprocess.run(
            [str(OPA_BINARY), "parse", "--format", "json", str(path)],
            check=True,
            capture_output=True,
            text=True,
        )
        module = json.loads(parsed.stdout)
        package = ".".join(str(p["value"]) for p in module["package"]["path"][1:])
        for rule in module.get("rules", []):
            head = rule["head"]
            name = head.get("name", "") or str(head.get("ref", [{}])[0].get("value", ""))
            if package == "whose.disclosure.denials" and head.get("key") is not None:
                found |= {r for r in [_reason_of(head["key"])] if r is not None}
            if name.endswith("denials") or name in ("notes", "causes"):
                heads = _comprehension_heads(head.get("value"))
                found |= {r for h in heads if (r := _reason_of(h)) is not None}
    return found


def test_policies_name_their_reasons() -> None:
    # Guards the extraction: if the policies change shape, this test must too.
    expected = {"tenant_mismatch", "audience_excludes", "observer_not_speaker", "not_authoritative"}
    assert expected <= _reasons()
    assert "cite_source" not in _reasons()  # an obligation, not a reason


def test_every_reason_is_asserted_by_a_rego_test() -> None:
    # A reason counts as tested where a test line compares against `reasons`.
    asserting = [
        line
        for path in REGO.rglob("*_test.rego")
        for line in path.read_text().splitlines()
        if re.search(r"\breasons\b", line)
    ]
    untested = sorted(r for r in _reasons() if not any(f'"{r}' in line for line in asserting))
    assert not untested, f"no opa test asserts these reasons: {untested}"


def test_policy_coverage_is_complete_and_reported() -> None:
    result = subprocess.run(
        [str(OPA_BINARY), "test", str(REGO), "--coverage", "--timeout", OPA_TEST_TIMEOUT],
        check=True,
        capture_output=True,
        text=True,
    )
    report = json.loads(result.stdout)
    lines = report["covered_lines"] + report.get("not_covered_lines", 0)
    REPORT.append(
        f"Rego policy coverage (opa test --coverage): {report['coverage']}% "
        f"({report['covered_lines']} of {lines} lines, {len(report['files'])} files)"
    )
    missed = {
        name: file.get("not_covered")
        for name, file in report["files"].items()
        if file.get("not_covered")
    }
    assert report["coverage"] == 100, f"not covered: {missed}"
