from __future__ import annotations

from pathlib import Path

from sidecar.schemas import MODELS, render

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def test_checked_in_schemas_match_the_models() -> None:
    stale = [
        name
        for name, model in MODELS.items()
        if not (SCHEMAS / f"{name}.schema.json").exists()
        or (SCHEMAS / f"{name}.schema.json").read_text() != render(model)
    ]
    assert not stale, f"schemas/ is out of date for {stale}: run `make schemas`"


def test_no_stray_schema_files() -> None:
    expected = {f"{name}.schema.json" for name in MODELS}
    assert {p.name for p in SCHEMAS.glob("*.json")} == expected
