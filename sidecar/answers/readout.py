"""What an LLM reads: an answer of the API as plain text. Pure.

The MCP tools (mcp/tools.py) hand this text to the model and the JSON answer to
the host. The text holds only what the answer itself discloses, worded as the
answer words it: each item's attribution sentence (never the writer's own
wording, `as_written`), what the policy lets it support, its obligations in
words ("cite private-session-42", "verify before acting"), and the verdict in
words. An abstention says so, and says nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.messages import (
    Conflict,
    ErasureResponse,
    ForgetRule,
    ForgetRuleSet,
    Grant,
    GrantList,
    HistoryResponse,
    Item,
    MembershipEvents,
    MemoryResponse,
    MindView,
    OtherMind,
    PropositionResponse,
    RecallResponse,
    StoredRecords,
    Verdict,
)

VERDICTS: dict[Verdict, str] = {
    "answer": (
        "answer: an authoritative, current fact is below; you may answer with it, and "
        "any beliefs stay attributed to their holders."
    ),
    "attributed": (
        "attributed: only beliefs, each someone's view. Present each as its holder's "
        '("alice believes ..."), never as a fact.'
    ),
    "conflict": (
        "conflict: people disagree about this. Present every view with its holder; do "
        "not pick one as true."
    ),
    "abstain": "abstain: nothing you may be told: verify or abstain.",
}


def obligation(code: str, item: Item) -> str:
    """One obligation in words; a code this sidecar does not know is shown as is, so a
    new obligation in the policy is never dropped."""
    if code == "attribute":
        holder = item.observer_id or (item.source.speaker if item.source else None)
        return f"attribute it to {holder}" if holder else "say whose claim it is"
    if code == "cite_source":
        return f"cite {item.source_id}"
    if code == "verify_before_acting":
        return "verify before acting"
    return code


def item_lines(number: int, item: Item) -> list[str]:
    lines = [f"{number}. {item.attribution}"]
    use = f"usable as: {item.usable_as}"
    if item.status != "current":
        use += f" ({item.status}: no longer held)"
    if item.obligations:
        use += "; obligations: " + "; ".join(obligation(o, item) for o in item.obligations)
    lines.append(f"   {use}")
    if item.notes:
        lines.append("   policy notes: " + ", ".join(item.notes))
    lines.append(f"   id: {item.id}")
    return lines


def _items(items: Sequence[Item]) -> list[str]:
    return [line for n, item in enumerate(items, 1) for line in item_lines(n, item)]


def _conflicts(conflicts: Sequence[Conflict]) -> list[str]:
    lines = []
    for conflict in conflicts:
        views = "; ".join(
            f"{view.holder or 'an unnamed source'}: {view.value} ({view.usable_as})"
            for view in conflict.views
        )
        lines.append(f"Disagreement about {conflict.key}: {views}.")
    return lines


def recall(answer: RecallResponse) -> str:
    lines = [VERDICTS[answer.verdict]]
    lines += _items(answer.items)
    lines += _conflicts(answer.conflicts)
    if answer.truncated:
        lines.append("(The search stopped at its bound: more may exist.)")
    return "\n".join(lines)


def propositions(answer: PropositionResponse) -> str:
    lines = [f"What people think about {answer.key}.", VERDICTS[answer.verdict]]
    if answer.world_state is not None:
        lines.append("The fact:")
        lines += item_lines(1, answer.world_state)
    if answer.perspectives:
        lines.append("Views:")
        lines += _items(answer.perspectives)
    implied = [view for mind in answer.minds for view in _derived(mind.about)]
    if implied:
        lines.append("What each thinks others think (from what they saw or heard):")
        lines += [f"- {view.attribution} (usable as: {view.usable_as})" for view in implied]
    lines += _conflicts(answer.conflicts)
    if answer.truncated:
        lines.append("(The listing stopped at its bound: more views may exist.)")
    return "\n".join(lines)


def _derived(others: Sequence[OtherMind]) -> list[MindView]:
    """The derived views of a mind tree (the stored ones are listed as perspectives)."""
    found = []
    for other in others:
        found += [view for view in other.views if view.derived_from is not None]
        found += _derived(other.about)
    return found


def memory(answer: MemoryResponse) -> str:
    return "\n".join(item_lines(1, answer.item))


def history(answer: HistoryResponse) -> str:
    lines = ["The versions of this memory you may see, oldest first:"]
    lines += _items(answer.items)
    return "\n".join(lines)


def stored(answer: StoredRecords) -> str:
    lines = [f"Remembered {len(answer.records)} claim(s), each as its speaker's own view:"]
    for n, record in enumerate(answer.records, 1):
        audience = ", ".join(record.audience)
        lines.append(f"{n}. {record.content} (visible to {audience}; id {record.id})")
    return "\n".join(lines)


def membership(answer: MembershipEvents) -> str:
    lines = [f"Recorded {len(answer.events)} membership change(s):"]
    for event in answer.events:
        corrects = f", correcting {event.corrects}" if event.corrects else ""
        lines.append(
            f"- {event.person} {event.change} {event.source_id} at {event.at.isoformat()}"
            f"{corrects} (id {event.id})"
        )
    return "\n".join(lines)


def erased(answer: ErasureResponse) -> str:
    lines = [f"Forgot {len(answer.erased)} memory version(s) for good:"]
    lines += [f"- id: {record_id}" for record_id in answer.erased]
    return "\n".join(lines)


def grant(answer: Grant, revoked: bool = False) -> str:
    what = ", ".join(answer.categories)
    until = f" until {answer.until.isoformat()}" if answer.until else ""
    purpose = f" for {answer.purpose}" if answer.purpose else ""
    if revoked:
        return (
            f"Revoked: {answer.reader} no longer sees {answer.subject}'s {what} "
            f"(grant {answer.grant_id})."
        )
    return (
        f"Granted: {answer.reader} may see {answer.subject}'s {what}{purpose}{until} "
        f"(grant {answer.grant_id})."
    )


def grants(answer: GrantList) -> str:
    if not answer.grants:
        return "No grants in force that you gave, are about you, or name you."
    return "\n".join(f"- {grant(g)}" for g in answer.grants)


def forget_rule_set(answer: ForgetRuleSet) -> str:
    rule, erasure = answer.rule, answer.erasure
    what = rule.key or rule.pattern or f"a value of {rule.value_length} characters"
    lines = [
        f"Will never keep {what} ({rule.kind}) about {rule.subject}: rule {rule.rule_id}.",
        f"Forgotten now: {erasure.erased} memory version(s); kept: {erasure.kept}"
        + (f" ({_counts(erasure.kept_because)})" if erasure.kept_because else "")
        + ("; still going" if erasure.status == "running" else "")
        + ".",
    ]
    return "\n".join(lines)


def forget_rule_lifted(rule: ForgetRule) -> str:
    return f"Lifted forget rule {rule.rule_id}: later memories are no longer checked against it."


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{reason}: {n}" for reason, n in sorted(counts.items()))


def refusal(error: str, words: str, reasons: Sequence[object]) -> str:
    """A refusal: the stable code first, so a model (and a person) can act on it, then
    what it means and why."""
    text = f"{error}: {words}"
    if reasons:
        text += "\nreasons: " + "; ".join(_reason(r) for r in reasons)
    return text


def _reason(reason: object) -> str:
    if isinstance(reason, dict):
        if "reasons" in reason:  # a write or erasure refusal: per record
            which = reason.get("index", reason.get("id"))
            return f"record {which}: " + ", ".join(map(str, reason["reasons"]))
        if "loc" in reason:  # a validation error
            where = ".".join(map(str, reason["loc"]))
            return f"{where}: {reason.get('type')} ({reason.get('msg')})"
    return str(reason)
