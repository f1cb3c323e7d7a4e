"""The collection's schema as the sidecar uses it: which payload fields are indexed
(and how), and how a record is addressed as a Qdrant point.

Both store backends create these indexes (store/edge.py, store/server.py); a caller's
filter may read only indexed fields (http/qdrant/caller_filter.py).
"""

from __future__ import annotations

import uuid

TENANT_FIELD = "tenant"

# Payload fields with an index, and the kind of index each gets (the store backends
# create them). A caller's filter may read only these: a condition on a field without
# an index makes the engine read every point's payload, about 10 µs a point per
# condition, holding the interpreter all along (docs/security.md, "Bounded cost").
KEYWORD_FIELDS = (
    "id",
    "observer_id",
    "observed_id",
    "observed_attitude",
    # Nested views and speech acts (reads/nested.py).
    "observed_path",
    "act",
    "modality",
    "access_scope",
    "audience",
    # What a grant discloses by (policy/grants.py, the pushdown's grant alternatives).
    "categories",
    "source_id",
    "source.kind",
    "source.speaker",
    "source.channel",
    "source.participants",
    "source.unnoticed",
    "proposition.key",
    "provenance.writer",
    "provenance.method",
    "provenance.derived_from",
    # The writer's own ids, and a RAG library's document ids (writes/versions.py).
    "provenance.chosen_id",
    "document.id",
    "evidence[].kind",
    "evidence[].ref",
    "evidence[].by",
    # Finds a version's stored successor: the evidence a write cut short leaves.
    "supersedes",
    "superseded_by",
)
DATETIME_FIELDS = ("valid_at", "invalid_at", "recorded_at", "evidence[].at")
FLOAT_FIELDS = ("confidence",)
# Full-text: the only field a caller's text match may read. Without an index the engine
# matches text by scanning every point.
TEXT_FIELDS = ("content",)
# The fields whose index adds HNSW links of its own (Qdrant's `enable_hnsw`, on by
# default): the tenant and the audience, whose conditions decide whether a filtered
# walk finds the asker's records. Every other index is built without them. A datetime
# index links the points of each block of its range, and with times that differ record
# by record those links made an ACORN walk 5x slower and the build 1.6x longer at 100k
# (docs/performance.md, round eight); a filter selective on any other field is searched
# exactly anyway (store/planner.py).
LINKED_FIELDS = frozenset((TENANT_FIELD, "audience"))
# What a collection is made with, before the rest of INDEXED_FIELDS: the indexes that
# change an answer or the graph, not only its speed. The tenant's and the audience's
# add HNSW links of their own (LINKED_FIELDS). Without its index the engine matches
# `content` as a substring, not by words; compares a number range with a datetime
# field, or a datetime range with a float one, differently; and checks `is_empty`
# inside a `nested` condition per element, not per point. Every index costs its
# making a flush of all made before it, so a stack's collection is made with these
# and gets the others later (store/edge.py; store/server.py: on its first use).
MADE_WITH = (
    LINKED_FIELDS
    | frozenset(TEXT_FIELDS)
    | frozenset(DATETIME_FIELDS)
    | frozenset(FLOAT_FIELDS)
    | frozenset(n for n in KEYWORD_FIELDS if "[]." in n)
)
# Where a document's own metadata is stored (writes/documents.py): a stack's own payload
# indexes are on paths under it, beside whose's indexes of the record (store/stacks.py).
OWN_METADATA = "document.metadata."
INDEXED_FIELDS = frozenset(
    (TENANT_FIELD, *KEYWORD_FIELDS, *DATETIME_FIELDS, *FLOAT_FIELDS, *TEXT_FIELDS)
)

_POINT_NAMESPACE = uuid.UUID("6f1d3a0e-5b7c-4d2a-9e8f-0a1b2c3d4e5f")


def point_id(tenant: str, record_id: uuid.UUID | str) -> str:
    """The Qdrant point id of a record: record ids are scoped by tenant.

    Two tenants can never address each other's points, even with a known id.
    """
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{tenant}\x00{record_id}"))
