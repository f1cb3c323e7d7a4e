"""How a disclosed record is worded: always whose claim it is, never a bare fact
unless the policy said it may be used as one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sidecar.messages import Item
from sidecar.policy import Decision
from sidecar.record import status_of

_BELIEF_VERB = {
    "asserted": "says",
    "believed": "believes",
    "reported_belief": "believes",
    "inferred": "is inferred to believe",
    "known": "believes",
    "common_knowledge": "believes",
}
_ATTITUDE = {"knows": "knows", "believes": "believes"}


def attribution(record: dict[str, Any], usable_as: str) -> str:
    claim = _claim(record)
    observer = record.get("observer_id") or "an unnamed source"
    observed = record.get("observed_id")
    if usable_as == "fact":
        sentence = claim[:1].upper() + claim[1:]
    elif usable_as == "unverified_claim":
        sentence = f"Unverified{_whose_claim(record)}: {claim}"
    elif usable_as == "knowledge":
        sentence = f"{observed or observer} knows that {claim}"
    elif usable_as == "common_knowledge":
        groups = ", ".join(a for a in record.get("audience", []) if a.startswith("group:"))
        sentence = f"It is common knowledge in {groups} that {claim}"
    elif usable_as == "nested_belief":
        verb = _BELIEF_VERB.get(record.get("modality", ""), "believes")
        attitude = _ATTITUDE.get(record.get("observed_attitude", ""), "believes")
        sentence = f"{observer} {verb} that {observed} {attitude} that {claim}"
    else:
        verb = _BELIEF_VERB.get(record.get("modality", ""), "believes")
        sentence = f"{observer} {verb} that {claim}"
    source, confidence = record.get("source_id"), record.get("confidence", 1.0)
    return f"{sentence} — source {source}, confidence {confidence:.2f}"


def _whose_claim(record: dict[str, Any]) -> str:
    """Who stands behind an unverified claim: its holder, else whoever recorded it.

    A world-state claim may have no holder; then the writer is the only one
    vouching for it, and the wording must say so rather than pass it off as
    anonymous (or as the words of the source's speaker)."""
    if observer := record.get("observer_id"):
        return f" (claimed by {observer})"
    if writer := (record.get("provenance") or {}).get("writer"):
        return f" (recorded by {writer})"
    return ""


def _claim(record: dict[str, Any]) -> str:
    proposition = record.get("proposition") or {}
    text = proposition.get("text")
    if text:
        return str(text)
    # Without a bare proposition the content is the claim; quote it, do not restate it.
    return f"“{record.get('content', '')}”"


def disclosed_item(
    record: dict[str, Any], decision: Decision, at: datetime, score: float | None = None
) -> Item:
    """An allowed record as the agent receives it: attributed, with its obligations."""
    usable_as = decision.usable_as
    return Item.model_validate(
        {
            **{k: v for k, v in record.items() if k in _ITEM_FIELDS},
            "attribution": attribution(record, usable_as),
            "usable_as": usable_as,
            "obligations": sorted(decision.obligations),
            "notes": sorted(decision.reasons),
            "status": status_of(record, at),
            "score": score,
        }
    )


_ITEM_FIELDS = set(Item.model_fields) - {
    "attribution",
    "usable_as",
    "obligations",
    "notes",
    "status",
    "score",
}
