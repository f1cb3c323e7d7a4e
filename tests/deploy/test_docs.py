"""The operator and security-team docs cannot drift from the code they describe.

- docs/operations.md names every WHOSE_* setting (read from Settings, so a new setting
  without documentation fails here);
- docs/policies.md lists every reason code the policies can give;
- the worked example in docs/policies.md is a real patch: it applies to a copy of
  rego/, passes `opa fmt`, `opa check --strict` and `opa test` at 100 % coverage, and
  the doc shows it verbatim; the shipped policy does not include it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from sidecar.settings import Settings
from tests.conftest import OPA_BINARY, OPA_TEST_TIMEOUT, POLICY_DIR, REPO, as_, start_sidecar, stop
from tests.factories import tell_the_worked_example
from tests.integration.test_rego_reasons import _reasons

DOCS = REPO / "docs"
EXAMPLE = DOCS / "examples" / "manager-reports.patch"


def settings_variables() -> set[str]:
    return {f"WHOSE_{name.upper()}" for name in Settings.model_fields}


def test_operations_doc_names_every_setting() -> None:
    text = (DOCS / "operations.md").read_text()
    missing = sorted(v for v in settings_variables() if not re.search(rf"\b{v}\b", text))
    assert not missing, f"docs/operations.md does not document: {missing}"


def test_settings_are_read_from_the_model() -> None:
    # Guards the test above against an empty or renamed field list.
    assert {"WHOSE_OPA_URL", "WHOSE_QDRANT_URL", "WHOSE_JWT_JWKS_FILE"} <= settings_variables()


def test_policies_doc_lists_every_reason_code() -> None:
    text = (DOCS / "policies.md").read_text()
    reasons = _reasons()
    assert len(reasons) > 10
    missing = sorted(r for r in reasons if f"`{r}" not in text)
    assert not missing, f"docs/policies.md does not list: {missing}"


def test_policies_doc_shows_the_tested_patch_verbatim() -> None:
    text = (DOCS / "policies.md").read_text()
    assert f"```diff\n{EXAMPLE.read_text()}```" in text


def test_readme_links_the_deploy_docs() -> None:
    readme = (REPO / "README.md").read_text()
    for target in ("docs/operations.md", "docs/policies.md", "deploy/compose.yaml"):
        assert f"]({target}" in readme, target
        assert (REPO / target).exists(), target


def test_the_readme_is_a_front_page_that_maps_every_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for page in DOCS.glob("*.md"):
        assert f"](docs/{page.name})" in readme, f"the README's map does not list {page.name}"


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_and_their_anchors_resolve() -> None:
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *DOCS.glob("*.md")]
    for page in pages:
        prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if "://" in target:
                continue
            path, _, anchor = target.partition("#")
            linked = page.parent / path if path else page
            assert linked.exists(), f"{page.name}: {target}"
            if anchor and linked.suffix == ".md":
                text = re.sub(r"```.*?```", "", linked.read_text(), flags=re.S)
                headings = {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
                assert anchor in headings, f"{page.name}: {target}"


def test_doc_links_point_at_files_that_exist() -> None:
    for doc in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(((?:\.\./)?[\w./-]+)\)", doc.read_text()):
            if "://" not in target:
                assert (doc.parent / target).exists(), f"{doc.name}: {target}"


# --- the worked example ------------------------------------------------------------


def opa(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # `opa test` fails a test that runs past 5 s by default: on a loaded machine one did.
    slow = ["--timeout", OPA_TEST_TIMEOUT] if args[0] == "test" else []
    return subprocess.run(
        [str(OPA_BINARY), *args, *slow], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def patched(tmp_path: Path) -> Path:
    """A copy of rego/ with the example applied (the repository's rego/ is untouched)."""
    shutil.copytree(POLICY_DIR, tmp_path / "rego")
    result = subprocess.run(
        ["git", "apply", "--whitespace=error", str(EXAMPLE)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"the example no longer applies to rego/:\n{result.stderr}"
    return tmp_path


def test_example_passes_fmt_check_and_tests_at_full_coverage(patched: Path) -> None:
    for args in (
        ("fmt", "--list", "--fail", "rego"),
        ("check", "--strict", "rego"),
        ("test", "rego", "-v"),
    ):
        result = opa(*args, cwd=patched)
        assert result.returncode == 0, f"opa {' '.join(args)}:\n{result.stdout}{result.stderr}"
    verbose = opa("test", "rego", "-v", cwd=patched).stdout
    assert "test_manager_never_sees_private_session_belief: PASS" in verbose
    coverage = opa("test", "rego", "--coverage", cwd=patched)
    assert json.loads(coverage.stdout)["coverage"] == 100


def test_example_tests_can_fail(patched: Path) -> None:
    # Drop the private-session guard: the example's own tests must catch it.
    rule = patched / "rego" / "whose" / "lib" / "reports" / "reports.rego"
    text = rule.read_text()
    guard = "\trecord.source.channel in config.reports.work_channels\n"
    assert guard in text
    rule.write_text(text.replace(guard, ""))
    result = opa("test", "rego", cwd=patched)
    assert result.returncode != 0
    assert "test_manager_never_sees_private_session_belief" in result.stdout


STANDUP_BELIEF = {
    "id": "b1",
    "tenant": "acme",
    "observer_id": "bob",
    "modality": "reported_belief",
    "source_id": "standup-2026-11-30",
    "source": {"kind": "conversation", "speaker": "bob", "channel": "launch-standup"},
    "audience": ["bob", "dave"],
    "valid_at": "2026-10-01T00:00:00Z",
}


def carol_may_see_standup(policy_dir: Path) -> bool:
    question = {
        "asker": {"id": "carol", "tenant": "acme"},
        "audience": [],
        "purpose": "recall",
        "now": "2026-11-30T12:00:00Z",
        "record": STANDUP_BELIEF,
    }
    command = [str(OPA_BINARY), "eval", "--format", "json", "--stdin-input"]
    command += ["--data", str(policy_dir), "--ignore", "*_test.rego"]
    result = subprocess.run(
        [*command, "data.whose.disclosure.single.allow"],
        input=json.dumps(question),
        capture_output=True,
        text=True,
        check=True,
    )
    allowed: bool = json.loads(result.stdout)["result"][0]["expressions"][0]["value"]
    return allowed


def test_example_changes_behaviour_only_where_applied(patched: Path) -> None:
    assert carol_may_see_standup(patched / "rego")
    assert not carol_may_see_standup(POLICY_DIR)


# --- alert rules --------------------------------------------------------------------


def test_alert_rules_are_complete_and_watch_documented_metrics() -> None:
    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yaml").read_text())
    operations = (DOCS / "operations.md").read_text()
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    assert len(alerts) >= 5
    for rule in alerts:
        assert rule["alert"] in operations, f"{rule['alert']} is not described"
        assert rule["labels"]["severity"] in {"page", "ticket"}
        assert rule["annotations"]["summary"]
        for metric in re.findall(r"\b(whose_[a-z_]+?)(?:_bucket)?\b", rule["expr"]):
            assert f"`{metric}" in operations, f"{rule['alert']}: {metric} is not documented"


def test_example_end_to_end_through_a_sidecar(patched: Path, tmp_path: Path) -> None:
    # The walkthrough in docs/policies.md: an extractor stores what bob said in the
    # stand-up and in a DM; carol (bob's manager, with the example applied) recalls.
    # This also proves the widened pushdown: the store filter must let the record in.
    base, process = start_sidecar(tmp_path / "sidecar", {"WHOSE_POLICY_DIR": str(patched / "rego")})
    try:
        with httpx.Client(base_url=base, timeout=10) as http:
            tell_the_worked_example(http, as_("extractor-bot"))
            recall = http.post(
                "/v1/recall", headers=as_("carol"), json={"query": "launch slips", "limit": 10}
            ).json()
    finally:
        stop(process)
    seen = {item["source_id"] for item in recall["items"]}
    assert seen == {"launch-standup-1"}, recall
    assert recall["verdict"] == "attributed"
