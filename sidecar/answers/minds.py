"""Views of one proposition grouped by whose mind they are in. Pure.

For theory-of-mind questions ("where does Anne think Sally will look?"): each holder's
own current views, and under them what the holder thinks each other person thinks
(the records with `observed_id`: B_anne(B_sally p)). Built only from the items an
answer already shows, so it says nothing the perspectives do not; the order is a
function of them (holder, person, valid time, id).

A claim without a holder (world state) is nobody's mind and is left out; it stays
in the answer's `world_state` or `perspectives`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sidecar.messages import Item, Mind, MindView, OtherMind


def minds(items: Iterable[Item]) -> list[Mind]:
    """The current items with a holder, grouped by holder and then by whose mind they
    are about."""
    own: dict[str, list[Item]] = defaultdict(list)
    about: dict[str, dict[str, list[Item]]] = defaultdict(lambda: defaultdict(list))
    for item in items:
        if item.status != "current" or item.observer_id is None:
            continue
        if item.observed_id is None:
            own[item.observer_id].append(item)
        else:
            about[item.observer_id][item.observed_id].append(item)
    return [
        Mind(
            holder=holder,
            views=_views(own.get(holder, [])),
            about=[
                OtherMind(observed=observed, views=_views(views))
                for observed, views in sorted(about.get(holder, {}).items())
            ],
        )
        for holder in sorted(own.keys() | about.keys())
    ]


def _views(items: list[Item]) -> list[MindView]:
    ordered = sorted(items, key=_started)
    return [
        MindView(
            record_id=item.id,
            value=item.proposition.value if item.proposition else None,
            attitude=item.observed_attitude,
            usable_as=item.usable_as,
            valid_at=item.valid_at,
            attribution=item.attribution,
        )
        for item in ordered
    ]


def _started(item: Item) -> tuple[float, str]:
    return (item.valid_at.timestamp() if item.valid_at else float("-inf"), str(item.id))
