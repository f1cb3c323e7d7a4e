from __future__ import annotations

from pathlib import Path

from sidecar.schemas import MODELS, POLICY_MODELS, render

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
GENERATED = {f"{name}.schema.json": model for name, model in MODELS.items()} | {
    f"policy/{name}.json": model for name, model in POLICY_MODELS.items()
}


def test_checked_in_schemas_match_the_models() -> None:
    stale = [
        name
        for name, model in GENERATED.items()
        if not (SCHEMAS / name).exists() or (SCHEMAS / name).read_text() != render(model)
    ]
    assert not stale, f"schemas/ is out of date for {stale}: run `make schemas`"


def test_no_stray_schema_files() -> None:
    found = {str(p.relative_to(SCHEMAS)) for p in SCHEMAS.rglob("*.json")}
    assert found == set(GENERATED)
