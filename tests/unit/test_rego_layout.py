"""Where each Rego package lives, and where it says what it is for (docs/policies.md).

A package lives in the directory its name says (`whose.lib.visibility` in
`rego/whose/lib/visibility/`), its tests (`whose.lib.visibility_test`) beside it, as
Regal's `directory-package-mismatch` asks; and a package describes itself in its
METADATA (`scope: package`, `description:`), where `opa inspect` and the security team's
tools read it, never in a free comment above `package`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REGO = Path(__file__).resolve().parents[2] / "rego"
FILES = sorted(REGO.rglob("*.rego"))
PACKAGE = re.compile(r"^package ([\w.]+)$", re.M)


def package_of(path: Path) -> str:
    found = PACKAGE.search(path.read_text())
    assert found, f"{path}: no package"
    return found.group(1)


def comments_above_package(path: Path) -> list[str]:
    """The comment lines right above `package` (its annotation block, if any)."""
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("package "))
    block: list[str] = []
    for line in reversed(lines[:at]):
        if not line.startswith("#"):
            break
        block.insert(0, line)
    return block


def test_the_policy_is_read() -> None:
    names = {package_of(p) for p in FILES}
    assert {"whose.disclosure", "whose.disclosure.denials", "whose.lib.visibility"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REGO)))
def test_a_package_lives_in_the_directory_its_name_says(path: Path) -> None:
    named = package_of(path).removesuffix("_test").split(".")
    assert list(path.parent.relative_to(REGO).parts) == named, (
        f"{path.relative_to(REGO)}: package {package_of(path)} belongs in rego/{'/'.join(named)}/"
    )


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REGO)))
def test_words_above_a_package_are_its_metadata(path: Path) -> None:
    block = comments_above_package(path)
    if block:
        assert block[0] == "# METADATA", (
            f"{path.relative_to(REGO)}: a comment above `package` belongs in its METADATA "
            f"(`# scope: package`, `# description: ...`): {block[0]!r}"
        )
        assert "# scope: package" in block


def test_every_policy_package_describes_itself() -> None:
    described = {
        package_of(path)
        for path in FILES
        if "# scope: package" in (block := comments_above_package(path))
        and any(line.startswith("# description:") for line in block)
    }
    policies = {package_of(p) for p in FILES if not p.name.endswith("_test.rego")}
    assert policies <= described, f"without a package description: {sorted(policies - described)}"
