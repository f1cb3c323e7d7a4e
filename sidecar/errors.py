"""One error tree: every refusal the core gives, with its machine-readable code.

The core raises these and nothing else about a request; each transport maps the tree
once (HTTP, the Qdrant routes included, in http/app.py; MCP in mcp/tools.py), so a
refusal reads the same whichever way it was asked.
`status` is the HTTP status the code stands for, kept with the code so that the two
never drift apart. Pure: no transport types here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar


class WhoseError(Exception):
    """A request whose refused; `reasons` say what to change (machine-readable)."""

    code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500

    def __init__(self, message: str = "", reasons: Sequence[object] = ()) -> None:
        super().__init__(message or self.code)
        self.reasons: list[object] = list(reasons)

    def body(self) -> dict[str, Any]:
        """The refusal as the HTTP API serves it (the Problem model's shape)."""
        return {"error": self.code, "reasons": self.reasons}


class InvalidRequest(WhoseError):
    """A request the sidecar will not run as asked, with every reason."""

    code = "invalid_request"
    status = 422


class NotFound(WhoseError):
    """No such record, or one the asker may not see: the two answer alike."""

    code = "not_found"
    status = 404

    def body(self) -> dict[str, Any]:
        # Nothing but the code: whatever else it said could tell forbidden from missing.
        return {"error": self.code}


class Forbidden(WhoseError):
    """The caller's role does not allow the route at all (never about one record)."""

    code = "forbidden"
    status = 403


class FilterRefused(WhoseError):
    """A caller's Qdrant filter the sidecar will not run (http/qdrant/caller_filter.py),
    or one the engine refused; `reason` is machine-readable."""

    code = "invalid_filter"
    status = 400

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, [reason])
        self.reason = reason


class Unavailable(WhoseError):
    """A dependency failed: nothing was disclosed or stored. Reasons stay empty (the
    message, for the log, may name internals a caller has no use for)."""

    code = "unavailable"
    status = 503


class AuditUnavailable(Unavailable):
    """The audit log cannot be queried now (entries are still written or spilled)."""

    code = "audit_unavailable"

    def body(self) -> dict[str, Any]:
        return {"error": self.code}


def validation_reasons(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Where and what, for each problem pydantic found (`exc.errors()`); never the input
    echoed back (pointless for the caller, and it may carry secrets into logs)."""
    return [
        {"loc": list(e.get("loc", ())), "type": e.get("type"), "msg": e.get("msg")} for e in errors
    ]
