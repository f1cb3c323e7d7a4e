"""The Python client of whose: the native API, sync and async, on httpx.

    from sidecar.client import WhoseClient, DevIdentity

It sends and reads the server's own models (sidecar/messages.py, record.py): one
source of truth, checked by mypy.
Refusals are raised as the error tree's classes (errors.py), re-exported here.
`as_text` words an answer the way the MCP tools hand it to a model.

The client imports no web framework, store or policy machinery (FastAPI, uvicorn,
Qdrant, Redis, OPA's client: tests/unit/test_layering.py), so an agent can use it
beside a sidecar it does not run. The LangGraph store is sidecar/client/langgraph.py.
"""

from sidecar.client.clients import (
    AsyncWhoseClient,
    DevIdentity,
    Retries,
    WhoseClient,
    may_retry,
)
from sidecar.client.text import as_text
from sidecar.errors import (
    AuditUnavailable,
    ErasureRefused,
    ErasureRequestsUnavailable,
    Forbidden,
    InvalidRequest,
    LockUnavailable,
    MethodNotAllowed,
    NotFound,
    PolicyUnavailable,
    RequestTooLarge,
    StoreUnavailable,
    Unauthenticated,
    Unavailable,
    WhoseError,
    WriteRefused,
)

__all__ = [
    "AsyncWhoseClient",
    "AuditUnavailable",
    "DevIdentity",
    "ErasureRefused",
    "ErasureRequestsUnavailable",
    "Forbidden",
    "InvalidRequest",
    "LockUnavailable",
    "MethodNotAllowed",
    "NotFound",
    "PolicyUnavailable",
    "RequestTooLarge",
    "Retries",
    "StoreUnavailable",
    "Unauthenticated",
    "Unavailable",
    "WhoseClient",
    "WhoseError",
    "WriteRefused",
    "as_text",
    "may_retry",
]
