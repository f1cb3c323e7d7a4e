"""JSON Schemas of the public models, generated into schemas/ and checked in."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from sidecar.decisions import Decision, WriteDecision
from sidecar.messages import RecallRequest, RecallResponse
from sidecar.record import MemoryRecord, MemoryWrite

MODELS: dict[str, type[BaseModel]] = {
    "memory-record": MemoryRecord,
    "memory-write": MemoryWrite,
    "recall-request": RecallRequest,
    "recall-response": RecallResponse,
    "disclosure-decision": Decision,
    "ingest-decision": WriteDecision,
}


def render(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in MODELS.items():
        path = folder / f"{name}.schema.json"
        path.write_text(render(model))
        written.append(path)
    return written
