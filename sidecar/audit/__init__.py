"""The audit log: one entry per request that asked the policy (reads, explain
calls, writes), written in the background to a Redis Stream or, without Redis,
to a SQLite file under the data directory.

- model.py: what an entry holds (AuditEntry, AuditedRecord, AuditedWrite,
  `read_entry`, `write_entry`) and which entries a query (AuditQuery) selects;
- sink.py: what the writer needs of a sink, and how a sink fails;
- redis_sink.py, sqlite_sink.py: the two sinks;
- spill.py: where entries wait while Redis is down;
- writer.py: AuditLog, the queue and background writer requests hand entries to.

The package exports the model only: `GET /v1/audit` answers with it, and the Python
client (sidecar/client/) reads it without importing Redis, SQLite or the metrics. The
sinks and the writer are imported from their modules.
"""

from sidecar.audit.model import (
    AuditedClaims,
    AuditedErasure,
    AuditedGrant,
    AuditedImpact,
    AuditedMembership,
    AuditedMembershipChange,
    AuditedRecord,
    AuditedWrite,
    AuditEntry,
    AuditPurpose,
    AuditQuery,
    ErasureOutcome,
    Outcome,
    RecordOutcome,
    WriteOutcome,
    WriteRoute,
    audited_write,
    read_entry,
    write_entry,
)

__all__ = [
    "AuditEntry",
    "AuditPurpose",
    "AuditQuery",
    "AuditedClaims",
    "AuditedErasure",
    "AuditedGrant",
    "AuditedImpact",
    "AuditedMembership",
    "AuditedMembershipChange",
    "AuditedRecord",
    "AuditedWrite",
    "ErasureOutcome",
    "Outcome",
    "RecordOutcome",
    "WriteOutcome",
    "WriteRoute",
    "audited_write",
    "read_entry",
    "write_entry",
]
