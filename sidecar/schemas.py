"""JSON Schemas of the public models and of the policy's contract, generated into
schemas/ and checked in (`make schemas`; a test fails when they drift).

schemas/*.schema.json: the API's records, requests and answers, and the policy's
answers (disclosure-decision, ingest-decision). schemas/policy/*.json: what the
policy is given — its input (disclosure_input, ingest_input) and the data
documents a security team edits (config, directory, vocabulary). The Rego names
them in its METADATA, and `opa check --strict --schema schemas/policy` type-checks
every rule against them (docs/policies.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from sidecar.answers.wording import Vocabulary
from sidecar.messages import RecallRequest, RecallResponse
from sidecar.policy.contract import (
    Decision,
    DisclosureInput,
    IngestInput,
    TrustInput,
    WriteDecision,
)
from sidecar.record import MemoryRecord, MemoryWrite, Name
from sidecar.writes.witnessed import WitnessedEvent

MODELS: dict[str, type[BaseModel]] = {
    "memory-record": MemoryRecord,
    "memory-write": MemoryWrite,
    "witnessed-event": WitnessedEvent,
    "recall-request": RecallRequest,
    "recall-response": RecallResponse,
    "disclosure-decision": Decision,
    "ingest-decision": WriteDecision,
}


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Principal(_Data):
    roles: list[Name] = Field(default_factory=list)
    scopes: list[Name] = Field(default_factory=list, description="Clearances held.")


class Tenant(_Data):
    principals: dict[str, Principal] = Field(default_factory=dict)
    groups: dict[str, list[Name]] = Field(
        default_factory=dict, description="Group name (without `group:`) to its members."
    )


class Directory(_Data):
    """data.whose.directory: who is in which group, who holds which clearance and role."""

    tenants: dict[str, Tenant]


class EvidencePolicy(_Data):
    accepted_kinds: list[Name] = Field(description="Evidence kinds that can support `known`.")
    signed_by_knower: list[Name] = Field(
        description="Kinds that count only when the knower gave them (`by`)."
    )


class Announcements(_Data):
    qualifying_channels: list[Name]


class Authoritative(_Data):
    source_kinds: list[Name]


class Ingest(_Data):
    relay_roles: list[Name] = Field(description="Roles that may write other people's views.")


class Trust(_Data):
    """Which of the trust policy's shipped examples are switched on (whose.trust)."""

    adopt_from_roles: list[Name] = Field(
        default_factory=list,
        description="A hearer adopts what a teller holding one of these roles says.",
    )
    adopt_more_recent_evidence: bool = Field(
        default=False,
        description="A hearer adopts what a teller says whose own evidence about the key "
        "is more recent than the hearer's.",
    )


class Config(_Data):
    """data.whose.config: the evidence policy, announcements, authorities, relays, trust."""

    evidence: EvidencePolicy
    announcements: Announcements
    authoritative: Authoritative
    ingest: Ingest
    attestation: dict[str, list[Name]] = Field(
        description="Source or evidence kind to the roles that may cite it."
    )
    trust: Trust = Field(default_factory=Trust, description="Testimony: see whose.trust.")


POLICY_MODELS: dict[str, type[BaseModel]] = {
    "disclosure_input": DisclosureInput,
    "ingest_input": IngestInput,
    "trust_input": TrustInput,
    "config": Config,
    "directory": Directory,
    "vocabulary": Vocabulary,
}


def render(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    (folder / "policy").mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in MODELS.items():
        path = folder / f"{name}.schema.json"
        path.write_text(render(model))
        written.append(path)
    for name, model in POLICY_MODELS.items():
        path = folder / "policy" / f"{name}.json"
        path.write_text(render(model))
        written.append(path)
    return written
