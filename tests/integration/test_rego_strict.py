"""The explain entrypoint evaluates under `--strict-builtin-errors`: a built-in that
errors (say `object.get` on a boolean) fails the query there instead of leaving a rule
silently undefined, which would drop it from an auditor's explanation."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import OPA_BINARY

REGO = Path(__file__).resolve().parents[2] / "rego"

RECORD = {
    "id": "r2",
    "tenant": "acme",
    "observer_id": "alice",
    "modality": "reported_belief",
    "source_id": "private-session-42",
    "source": {"kind": "conversation", "speaker": "alice"},
    "audience": ["group:launch-team"],
    "valid_at": "2026-10-01T00:00:00Z",
}


def explain_strictly(asker: dict[str, str]) -> dict[str, object]:
    query = {
        "asker": asker,
        "audience": [],
        "purpose": "explain",
        "now": "2026-11-30T12:00:00Z",
        "record": RECORD,
    }
    run = subprocess.run(
        [
            str(OPA_BINARY),
            "eval",
            "--strict-builtin-errors",
            "--format",
            "json",
            "--data",
            str(REGO),
            "--stdin-input",
            "data.whose.disclosure.explanation",
        ],
        input=json.dumps(query),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(run.stdout)["result"]
    assert len(results) == 1, run.stdout
    explanation: dict[str, object] = results[0]["expressions"][0]["value"]
    return explanation


def test_explanation_evaluates_under_strict_builtin_errors() -> None:
    explanation = explain_strictly({"id": "bob", "tenant": "acme"})
    rules = explanation["rules"]
    assert isinstance(rules, list)
    names = {rule["rule"] for rule in rules}
    assert "data.whose.disclosure.denials.asker" in names
    assert "data.whose.disclosure.denials.hearers" in names


def test_explanation_of_an_asker_without_a_tenant_names_no_asker() -> None:
    explanation = explain_strictly({"id": "bob"})
    rules = {rule["rule"]: rule["reasons"] for rule in explanation["rules"]}  # type: ignore[attr-defined]
    assert rules["data.whose.disclosure.denials.asker"] == ["no_asker"]
