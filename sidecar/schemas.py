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
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sidecar.answers.wording import Vocabulary
from sidecar.messages import RecallRequest, RecallResponse, WitnessedEvent
from sidecar.policy.contract import (
    CollectionsInput,
    ConsentInput,
    ConversationsInput,
    Decision,
    DerivedChoice,
    DisclosureInput,
    ErasureInput,
    ForgettingInput,
    IngestInput,
    LabelingInput,
    RetentionInput,
    TrustInput,
    WriteDecision,
)
from sidecar.record import MemoryRecord, MemoryWrite, Modality, Name, PremiseChange, SourceKind

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


class Erasure(_Data):
    """Who may erase what beyond their own records, and what becomes of derivations."""

    officer_roles: list[Name] = Field(
        description="Roles that may make bulk erasure requests (by subject, source, "
        "tenant) and erase any record they may see."
    )
    on_derived: DerivedChoice = Field(
        description="What becomes of a record derived from an erased one: `flag` (served "
        "as stale, with a note), `withdraw` (its valid time ends), `erase` (erased too)."
    )


class RetentionRule(_Data):
    """A maximum age; the fields given narrow which records it covers."""

    max_age_days: int = Field(ge=1, description="Days after `recorded_at` a record expires.")
    tenant: Name | None = None
    modality: Modality | None = None
    source_kind: SourceKind | None = None
    source_id: Name | None = None
    access_scope: Name | None = None


class Retention(_Data):
    rules: list[RetentionRule] = Field(
        description="The shortest rule that covers a record applies; none: kept."
    )


class Stale(_Data):
    withhold: list[PremiseChange] = Field(
        description="A derived record one of whose premises changed this way is not "
        "disclosed at all; otherwise it is served as stale, with a note."
    )


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
    believe_told: bool = Field(
        default=False,
        description="A hearer believes an unhedged claim they are told unless they saw the "
        "key for themselves then; a later sight or a later teller supersedes it.",
    )


class LabelingRule(_Data):
    """Labels by where a document sits: a rule matches a document in `collection` (any,
    if unset) whose metadata `key` starts with `prefix` or equals `equals` (any
    document, if no key), and gives it `access_scope`, and `audience` when the
    document names no readers itself."""

    collection: Name | None = None
    key: Name | None = None
    prefix: str | None = Field(default=None, min_length=1)
    equals: str | None = None
    access_scope: Name | None = None
    audience: list[Name] = Field(default_factory=list)
    categories: list[Name] = Field(
        default_factory=list, description="Categories every matching document carries."
    )


class Labeling(_Data):
    """Which metadata keys give a document's labels (whose.labeling): the first key
    that holds a value gives the label. Unset: the convention of writes/documents.py."""

    audience_keys: list[Name] = Field(
        default=["audience"], description="Who may read it: a reader or a list of readers."
    )
    holder_keys: list[Name] = Field(default=["holder"], description="Whose view it is.")
    author_keys: list[Name] = Field(default=["author"], description="Whose words it is.")
    source_keys: list[Name] = Field(
        default=["source_id", "source", "file_path"],
        description="Where it comes from (else its library's document id).",
    )
    scope_keys: list[Name] = Field(default=["access_scope"], description="Its access scope.")
    category_keys: list[Name] = Field(
        default=["categories"], description="Its categories: a name or a list of names."
    )
    rules: list[LabelingRule] = Field(default_factory=list)


class Collections(_Data):
    """Who may drop a stack collection besides its creator (whose.collections)."""

    admin_roles: list[Name] = Field(
        default=["admin"],
        description="Roles that may drop any collection of their tenant (dropping one "
        "erases every document in it, including ones the dropper may not read).",
    )


class Consent(_Data):
    """Record categories and who may grant for others (whose.consent, lib/categories)."""

    categories: list[Name] = Field(
        default_factory=list,
        description="The categories a record, a labeling rule and a grant may name "
        "(a tenant without a list in `tenants`); none when unset.",
    )
    tenants: dict[str, list[Name]] = Field(
        default_factory=dict, description="A tenant's own vocabulary, in place of `categories`."
    )
    act_for_roles: list[Name] = Field(
        default_factory=list,
        description="Roles that may grant and revoke for anyone of their tenant; "
        "unset: only the subject themselves.",
    )


class Conversations(_Data):
    """Who may correct a conversation's membership events (whose.conversations)."""

    corrector_roles: list[Name] = Field(
        default_factory=lambda: ["authority"],
        description="Roles that may correct anyone's membership event (its writer always may).",
    )


class Forgetting(_Data):
    """Standing forget rules (whose.forgetting)."""

    min_value_length: int = Field(
        default=4, ge=1, description="The shortest value a rule may forget (shorter: refused)."
    )
    patterns: bool = Field(default=True, description="Whether rules may name a pattern at all.")
    on_write: Literal["redact", "refuse"] = Field(
        default="redact",
        description="What becomes of a later write a value or pattern rule binds: the "
        "match masked and the record stored, or the write refused (a key rule always "
        "refuses).",
    )


class Config(_Data):
    """data.whose.config: the evidence policy, announcements, authorities, relays,
    erasure, retention, trust, labeling and stack collections."""

    evidence: EvidencePolicy
    announcements: Announcements
    authoritative: Authoritative
    ingest: Ingest
    attestation: dict[str, list[Name]] = Field(
        description="Source or evidence kind to the roles that may cite it; `presence`: "
        "the roles that may name people other than themselves as present "
        "(`source.participants`, `source.unnoticed`), the extractor if unset."
    )
    erasure: Erasure | None = Field(
        default=None, description="Absent: no erasure officer; derivations flagged."
    )
    retention: Retention | None = Field(default=None, description="Absent: nothing expires.")
    stale: Stale | None = Field(
        default=None, description="Absent: stale derivations are disclosed, with notes."
    )
    trust: Trust = Field(default_factory=Trust, description="Testimony: see whose.trust.")
    labeling: Labeling = Field(
        default_factory=Labeling,
        description="Documents through the Qdrant dialect: see whose.labeling.",
    )
    collections: Collections = Field(
        default_factory=Collections,
        description="Stack collections through the Qdrant dialect: see whose.collections.",
    )
    consent: Consent = Field(
        default_factory=Consent,
        description="Record categories and grants: see whose.consent (docs/consent.md).",
    )
    conversations: Conversations = Field(
        default_factory=lambda: Conversations(),
        description="Conversation membership: see whose.conversations.",
    )
    forgetting: Forgetting = Field(
        default_factory=Forgetting, description="Standing forget rules: see whose.forgetting."
    )


class TenantHolds(_Data):
    records: list[Name] = Field(default_factory=list, description="Record ids held.")
    subjects: list[Name] = Field(
        default_factory=list,
        description="People whose records (held, said, or about them) are held.",
    )


class Holds(_Data):
    """data.whose.holds: legal holds, per tenant; a held record is neither erased nor
    expired, by anyone."""

    tenants: dict[str, TenantHolds]


POLICY_MODELS: dict[str, type[BaseModel]] = {
    "disclosure_input": DisclosureInput,
    "ingest_input": IngestInput,
    "erasure_input": ErasureInput,
    "retention_input": RetentionInput,
    "trust_input": TrustInput,
    "labeling_input": LabelingInput,
    "collections_input": CollectionsInput,
    "consent_input": ConsentInput,
    "conversations_input": ConversationsInput,
    "forgetting_input": ForgettingInput,
    "config": Config,
    "directory": Directory,
    "holds": Holds,
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
