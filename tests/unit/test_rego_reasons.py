"""Every reason code the policies can give has an `opa test` case naming it."""

from __future__ import annotations

import re
from pathlib import Path

REGO = Path(__file__).resolve().parents[2] / "rego"
REASON = re.compile(r'\{"([a-z_]+)(?::%s)?"\s*\|', re.MULTILINE)
REASON_FMT = re.compile(r'sprintf\("([a-z_]+):%s"')


def _reasons() -> set[str]:
    found: set[str] = set()
    for path in REGO.rglob("*.rego"):
        if path.name.endswith("_test.rego"):
            continue
        text = path.read_text()
        found |= set(REASON.findall(text)) | set(REASON_FMT.findall(text))
    return found


def test_policies_name_their_reasons() -> None:
    # Guards the pattern below: if the policies change shape, this test must too.
    assert {"tenant_mismatch", "audience_excludes", "observer_not_speaker"} <= _reasons()


def test_every_reason_has_a_rego_test() -> None:
    tests = "\n".join(p.read_text() for p in REGO.rglob("*_test.rego"))
    untested = sorted(r for r in _reasons() if f'"{r}' not in tests)
    assert not untested, f"no opa test names these reasons: {untested}"
