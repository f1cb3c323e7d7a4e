"""Views of one proposition grouped by whose mind they are in. Pure.

For theory-of-mind questions ("where does Anne think Sally thinks Anne will look?"):
each holder's own current views, and under them what the holder thinks each other
person thinks, and what they think that person thinks others think, to the depth
asked for (the records with an observed chain: B_anne(B_sally(B_anne p)), stored or
derived, answers/derived.py). Built only from the items an answer may show, so it
says nothing the perspectives and the derived views do not; the order is a function
of them (holder, person, valid time, id).

A claim without a holder (world state) is nobody's mind and is left out; it stays
in the answer's `world_state` or `perspectives`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from sidecar.messages import Item, Mind, MindView, OtherMind


@dataclass
class _Node:
    views: list[Item] = field(default_factory=list)
    about: dict[str, _Node] = field(default_factory=lambda: defaultdict(_Node))


def minds(items: Iterable[Item]) -> list[Mind]:
    """The current items with a holder, grouped by holder and then by the chain of
    minds they are about."""
    holders: dict[str, _Node] = defaultdict(_Node)
    for item in items:
        if item.status != "current" or item.observer_id is None:
            continue
        node = holders[item.observer_id]
        for observed in item.observed_path or ([item.observed_id] if item.observed_id else []):
            node = node.about[observed]
        node.views.append(item)
    return [
        Mind(holder=holder, views=_views(node.views), about=_others(node))
        for holder, node in sorted(holders.items())
    ]


def _others(node: _Node) -> list[OtherMind]:
    return [
        OtherMind(observed=observed, views=_views(inner.views), about=_others(inner))
        for observed, inner in sorted(node.about.items())
    ]


def _views(items: list[Item]) -> list[MindView]:
    ordered = sorted(items, key=_started)
    return [
        MindView(
            record_id=item.id,
            value=item.proposition.value if item.proposition else None,
            attitude=item.observed_attitude,
            act=item.act,
            usable_as=item.usable_as,
            valid_at=item.valid_at,
            attribution=item.attribution,
            derived_from=item.derived_from,
        )
        for item in ordered
    ]


def _started(item: Item) -> tuple[float, str]:
    return (item.valid_at.timestamp() if item.valid_at else float("-inf"), str(item.id))
