"""The audit log: one entry per request that asked the policy (reads, explain
calls, writes), written in the background to a Redis Stream or, without Redis,
to a SQLite file under the data directory.

- model.py: what an entry holds (AuditEntry, AuditedRecord, AuditedWrite,
  `read_entry`, `write_entry`) and which entries a query (AuditQuery) selects;
- sink.py: what the writer needs of a sink, and how a sink fails;
- redis_sink.py, sqlite_sink.py: the two sinks;
- spill.py: where entries wait while Redis is down;
- writer.py: AuditLog, the queue and background writer requests hand entries to.
"""

from sidecar.audit.model import (
    AuditedRecord,
    AuditedWrite,
    AuditEntry,
    AuditQuery,
    Outcome,
    Purpose,
    RecordOutcome,
    WriteOutcome,
    WriteRoute,
    audited_write,
    read_entry,
    write_entry,
)
from sidecar.audit.redis_sink import RedisSink
from sidecar.audit.sink import SCAN, SINK_ERRORS, Sink
from sidecar.audit.spill import SpillFile
from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog

__all__ = [
    "SCAN",
    "SINK_ERRORS",
    "AuditEntry",
    "AuditLog",
    "AuditQuery",
    "AuditedRecord",
    "AuditedWrite",
    "Outcome",
    "Purpose",
    "RecordOutcome",
    "RedisSink",
    "Sink",
    "SpillFile",
    "SqliteSink",
    "WriteOutcome",
    "WriteRoute",
    "audited_write",
    "read_entry",
    "write_entry",
]
