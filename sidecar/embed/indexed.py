"""What is indexed for a record: the text both the dense embedding and the lexical
vector are made from.

A claim alone loses whose it is and when it applied: "I went to a support group
yesterday" matches "what did Melanie do?" as well as "what did Caroline do?". So the
indexed text names the holder (and the person whose mind a nested view is about) and
the day the claim applied, in words, before the claim:

    caroline, 8 May 2023: I went to a support group yesterday
    alice about bob, 1 October 2026: the launch is October 17

Only what the record's payload already says goes in, so a record shows nothing through
its index that it does not show when disclosed (and an undisclosed record is never a
candidate: docs/design.md §5).
"""

from __future__ import annotations

from typing import Any

from sidecar.record import day


def indexed_text(payload: dict[str, Any]) -> str:
    head, claim = indexed_parts(payload)
    return f"{head}: {claim}" if head else claim


def indexed_parts(payload: dict[str, Any]) -> tuple[str, str]:
    """Whose and when ("caroline, 8 May 2023"; empty when the payload says neither),
    and the claim. The lexical vector weighs the two apart (embed/lexical.py)."""
    source = payload.get("source") or {}
    holder = payload.get("observer_id") or source.get("speaker")
    who = str(holder) if holder else ""
    if observed := payload.get("observed_id"):
        who = f"{who} about {observed}".strip()
    when = day(payload.get("valid_at"))
    head = ", ".join(part for part in (who, when) if part)
    claim = (payload.get("proposition") or {}).get("text") or payload.get("content") or ""
    return head, str(claim)
