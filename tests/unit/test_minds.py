"""Views grouped by whose mind they are in (sidecar/answers/minds.py)."""

from __future__ import annotations

import uuid
from typing import Any

from sidecar.answers.minds import minds
from sidecar.messages import Item


def item(holder: str | None, value: str, **extra: Any) -> Item:
    return Item.model_validate(
        {
            "id": uuid.uuid4(),
            "attribution": "...",
            "usable_as": "belief",
            "obligations": ["attribute", "cite_source"],
            "status": "current",
            "content": "...",
            "as_written": "...",
            "proposition": {"text": "p", "key": "marble", "value": value},
            "observer_id": holder,
            "modality": "observed",
            "source_id": "room-1",
            "confidence": 1.0,
            "valid_at": "2026-03-01T10:00:00Z",
        }
        | extra
    )


def test_each_holder_with_what_they_think_others_think() -> None:
    sally = item("sally", "basket")
    anne = item("anne", "box", valid_at="2026-03-01T10:05:00Z")
    anne_on_sally = item(
        "anne",
        "basket",
        observed_id="sally",
        observed_attitude="believes",
        usable_as="nested_belief",
    )
    grouped = minds([anne_on_sally, anne, sally])
    assert [m.holder for m in grouped] == ["anne", "sally"]
    [anne_mind, sally_mind] = grouped
    assert [(v.record_id, v.value) for v in anne_mind.views] == [(anne.id, "box")]
    [other] = anne_mind.about
    assert other.observed == "sally"
    assert [(v.record_id, v.value, v.attitude, v.usable_as) for v in other.views] == [
        (anne_on_sally.id, "basket", "believes", "nested_belief")
    ]
    assert [v.value for v in sally_mind.views] == ["basket"]
    assert sally_mind.about == []


def test_a_holder_known_only_through_their_views_of_others() -> None:
    [mind] = minds([item("anne", "basket", observed_id="sally", observed_attitude="believes")])
    assert (mind.holder, mind.views, [o.observed for o in mind.about]) == ("anne", [], ["sally"])


def test_superseded_versions_and_world_state_are_nobodys_current_mind() -> None:
    old = item("anne", "basket", status="superseded")
    fact = item(None, "box", modality="world_state", usable_as="fact")
    assert minds([old, fact]) == []


def test_views_in_order_of_valid_time_then_id() -> None:
    later = item("anne", "box", valid_at="2026-03-01T10:05:00Z")
    earlier = [item("anne", "basket") for _ in range(3)]
    [mind] = minds([later, *earlier])
    expected = [*sorted((e.id for e in earlier), key=str), later.id]
    assert [v.record_id for v in mind.views] == expected


def test_minds_nest_along_each_chain_of_minds() -> None:
    deep = item(
        "anne",
        "basket",
        observed_id="sally",
        observed_path=["sally", "anne", "sally"],
        observed_attitude="believes",
    )
    heard = item("anne", "box", observed_id="sally", act="heard")
    [anne] = minds([deep, heard])
    [sally] = anne.about
    assert [v.act for v in sally.views] == ["heard"]
    [back] = sally.about
    assert back.observed == "anne"
    assert back.views == []
    [again] = back.about
    assert (again.observed, [v.value for v in again.views]) == ("sally", ["basket"])
