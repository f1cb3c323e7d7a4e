"""The verdict of a recall, from the items the policy let through. Pure.

answer      an authoritative, current world-state claim is among them
conflict    holders disagree about the value of one proposition
attributed  only beliefs: present them with attribution
abstain     nothing disclosable: verify or abstain
"""

from __future__ import annotations

from collections import defaultdict

from sidecar.messages import Conflict, Item, Verdict, View

# Views of p itself; a nested belief is about someone's mind, not a value for p.
_VIEWS_OF_P = {"fact", "knowledge", "common_knowledge", "belief", "unverified_claim"}


def decide(items: list[Item]) -> tuple[Verdict, list[Conflict]]:
    current = [item for item in items if item.status == "current"]
    conflicts = find_conflicts(current)
    facts = [item for item in current if item.usable_as == "fact"]
    if facts and not find_conflicts(facts):
        # The beliefs stay attached as context, disagreeing ones as conflicts.
        return "answer", conflicts
    if conflicts:
        return "conflict", conflicts
    if items:
        return "attributed", conflicts
    return "abstain", []


def find_conflicts(items: list[Item]) -> list[Conflict]:
    by_key: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        p = item.proposition
        if p is not None and p.key and p.value is not None and item.usable_as in _VIEWS_OF_P:
            by_key[p.key].append(item)
    conflicts = []
    for key, group in by_key.items():
        values = {_comparable(item) for item in group}
        if len(values) > 1:
            views = [
                View(
                    holder=item.observer_id,
                    value=item.proposition.value if item.proposition else None,
                    record_id=item.id,
                    usable_as=item.usable_as,
                )
                for item in group
            ]
            conflicts.append(Conflict(key=key, views=views))
    return conflicts


def newest_fact(items: list[Item]) -> Item | None:
    """The world-state claim to answer with: the newest current fact.

    Meant for an `answer` verdict, where every current fact agrees on the value.
    """
    facts = [item for item in items if item.status == "current" and item.usable_as == "fact"]
    return max(facts, key=_started, default=None)


def settle(items: list[Item]) -> list[Item]:
    """Mark as superseded any item that another item in the set says it replaces.

    The store normally says so already; this covers a write interrupted between
    storing the new version and closing the old one, until the chain is repaired.
    """
    replaced = {item.supersedes for item in items if item.supersedes is not None}
    # A closed version (invalid_at set) already has the status of the instant asked
    # about: it may still have applied then, its successor starting later.
    return [
        item.model_copy(update={"status": "superseded"})
        if item.id in replaced and item.invalid_at is None
        else item
        for item in items
    ]


def _started(item: Item) -> tuple[float, str]:
    return (item.valid_at.timestamp() if item.valid_at else float("-inf"), str(item.id))


def _comparable(item: Item) -> str:
    value = item.proposition.value if item.proposition else None
    # 2 and 2.0 are one value; 1 and True, "1" and 1 are different claims.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"number:{float(value)}"
    return f"{type(value).__name__}:{value}"
