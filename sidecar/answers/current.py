"""One current view per mind, as each asker may see it. Pure.

Supersession keeps chains per audience (writes/supersession.py): what Bob was told
must not change when Alice privately learns more, so Alice's statement to Bob and
her own perception are two chains, each with a current version. As a mind, though,
Alice holds one view at a time: the latest of all her versions of the proposition
(docs/design.md §4, "one current view per mind"). So whoever may see all her
versions (Alice herself, a narrator reading everything) finds her perception
current and her earlier statement superseded in her mind, and Bob, who may see only
the statement, still finds it current: what he was told stays what he was told.

"Current" is therefore computed per question, over the views that question may be
shown (the decided, allowed ones), and nothing else: a version the asker or the
audience may not see shapes nothing they are shown. A line (answers/derived.Line) is
one holder's views of one chain of minds about one key; a version is superseded in
the mind when another version of its line, started later but no later than the
instant asked about, may be shown too. Versions that start at the same instant are
both current (a conflict, if they disagree, is real).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from uuid import UUID

from sidecar.answers.derived import Line
from sidecar.messages import Item

LINKS = {"supersedes": None, "superseded_by": None}


def line(item: Item) -> Line | None:
    """The line an item is a version of (None: world state, keyless, nobody's mind)."""
    key = item.proposition.key if item.proposition else None
    if item.observer_id is None or not key:
        return None
    path = tuple(item.observed_path or ([item.observed_id] if item.observed_id else []))
    return Line(item.observer_id, path, key, item.act == "heard")


def latest(items: Iterable[Item], at: datetime) -> dict[Line, Item]:
    """Each line's latest version started no later than `at` (the lower id on a tie)."""
    best: dict[Line, Item] = {}
    for item in items:
        mind = line(item)
        if mind is None or not _started_by(item, at):
            continue
        held = best.get(mind)
        if held is None or _order(item) > _order(held):
            best[mind] = item
    return best


def superseded(items: Sequence[Item], seen: Iterable[Item], at: datetime) -> set[UUID]:
    """Ids of `items` that a later version of their line among `items` and `seen`
    (further views the same question may be shown), started by `at`, supersedes."""
    starts: dict[Line, list[datetime]] = defaultdict(list)
    for item in [*items, *seen]:
        mind = line(item)
        if mind is not None and item.valid_at is not None and item.valid_at <= at:
            starts[mind].append(item.valid_at)
    replaced = set()
    for item in items:
        mind = line(item)
        if mind is None or item.valid_at is None:
            continue
        if any(start > item.valid_at for start in starts.get(mind, ())):
            replaced.add(item.id)
    return replaced


def in_mind(
    items: list[Item],
    seen: Sequence[Item],
    at: datetime,
    fits: Callable[[Item], bool] = lambda _: True,
) -> list[Item]:
    """`items` as their holders now hold them: a version superseded in its holder's
    mind gives way to the latest of its line, if that one `fits` the read's filters
    (taken from `seen`, it is shown without links, which name versions this answer
    does not list), once each."""
    replaced = superseded(items, seen, at)
    if not replaced:
        return items
    heads = latest([*items, *seen], at)
    shown: set[UUID] = set()
    kept = []
    for item in items:
        if item.id in replaced:
            mind = line(item)
            head = heads.get(mind) if mind is not None else None
            if head is None or not fits(head):
                continue
            item = head.model_copy(update=LINKS) if head.id not in {i.id for i in items} else head
        if item.id not in shown and item.id not in replaced:
            shown.add(item.id)
            kept.append(item)
    return kept


def marked(items: list[Item], seen: Sequence[Item], at: datetime) -> list[Item]:
    """`items` with every version superseded in its holder's mind marked so (a history)."""
    replaced = superseded(items, seen, at)
    return [
        item.model_copy(update={"status": "superseded"}) if item.id in replaced else item
        for item in items
    ]


def _started_by(item: Item, at: datetime) -> bool:
    return item.valid_at is not None and item.valid_at <= at


def _order(item: Item) -> tuple[datetime, int]:
    assert item.valid_at is not None
    # On a tie, the lower id (negated, so max() picks it).
    return (item.valid_at, -item.id.int)
