"""The verdict of an answer, from the items the policy let through. Pure.

answer      an authoritative, current claim the policy's vocabulary says answers
            (a fact) is among them, and no other such claim disagrees
conflict    holders disagree about the value of one proposition
attributed  only beliefs: present them with attribution
abstain     nothing disclosable: verify or abstain

Conflicts are found among every disclosable current view of the propositions in
the answer, not only among the items a `limit` kept: a disagreement the caller
may see is never hidden by the size of the page (reads/reader.py gathers those views).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sidecar.answers.wording import Vocabulary
from sidecar.messages import Conflict, Item, Verdict, View


def verdict_of(
    items: list[Item], vocabulary: Vocabulary, others: Sequence[Item] = ()
) -> tuple[Verdict, list[Conflict]]:
    """`others`: further disclosable views of the items' propositions, current at
    the instant asked about, that the answer itself does not list."""
    current = [item for item in items if item.status == "current"]
    shown = {item.id for item in current}
    views = current + [o for o in others if o.status == "current" and o.id not in shown]
    conflicts = find_conflicts(views, vocabulary)
    facts = [item for item in views if vocabulary.answers(item.usable_as)]
    if any(vocabulary.answers(item.usable_as) for item in current) and not find_conflicts(
        facts, vocabulary
    ):
        # The beliefs stay attached as context, disagreeing ones as conflicts.
        return "answer", conflicts
    if conflicts:
        return "conflict", conflicts
    if items:
        return "attributed", conflicts
    return "abstain", []


def find_conflicts(items: Sequence[Item], vocabulary: Vocabulary) -> list[Conflict]:
    by_key: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        p = item.proposition
        if (
            p is not None
            and p.key
            and p.value is not None
            and vocabulary.view_of_claim(item.usable_as)
        ):
            by_key[p.key].append(item)
    conflicts = []
    for key, group in by_key.items():
        values = {_comparable(item) for item in group}
        if len(values) > 1:
            views = [
                View(
                    holder=item.observer_id or (item.source.speaker if item.source else None),
                    value=item.proposition.value if item.proposition else None,
                    record_id=item.id,
                    usable_as=item.usable_as,
                )
                for item in group
            ]
            conflicts.append(Conflict(key=key, views=views))
    return conflicts


def newest_fact(items: list[Item], vocabulary: Vocabulary) -> Item | None:
    """The claim to answer with: the newest current one that answers.

    Meant for an `answer` verdict, where every current fact agrees on the value.
    """
    facts = [
        item for item in items if item.status == "current" and vocabulary.answers(item.usable_as)
    ]
    return max(facts, key=_started, default=None)


def mark_replaced(items: list[Item]) -> list[Item]:
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
    # 2 and 2.0 are one value; 1 and True, "1" and 1 are different claims. Integers are
    # compared exactly: as floats, 2**63 - 1 and 2**63 - 2 would be one value, and the
    # conflict between them missed.
    if isinstance(value, float) and value.is_integer():
        return f"number:{int(value)}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"number:{value!r}"
    return f"{type(value).__name__}:{value}"
