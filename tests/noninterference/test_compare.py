"""The comparison the property relies on, on MCP answers: relaxed exactly where the
answer's own order is free (equal scores, generated ids), strict everywhere else."""

from __future__ import annotations

import json
from typing import Any

from tests.noninterference.harness import Observation, canonical, tie_only


def recall(items: list[tuple[str, str, float]], text: str, *, error: bool = False) -> Any:
    """An MCP recall as run_mcp records it: items (id, usable_as, score), a conflict
    between the first two (ids the sidecar generated), and the text."""
    return {
        "verdict": "conflict",
        "items": [{"id": i, "usable_as": u, "score": s} for i, u, s in items],
        "conflicts": [
            {
                "key": "k1",
                "views": [{"record_id": i, "usable_as": u} for i, u, _ in items[:2]],
            }
        ],
        "truncated": False,
        "mcp": {"is_error": error, "content_types": ["text"], "text": text},
    }


def text(*blocks: tuple[str, str]) -> str:
    lines = ["conflict: people disagree about this."]
    for n, (who, use) in enumerate(blocks, 1):
        lines += [f"{n}. {who} says so", f"   usable as: {use}", f"   id: <{who}>"]
    return "\n".join(lines)


def seen(body: Any, limit: int) -> Observation:
    return Observation("MCP recall", 200, canonical(body, "ranked"), None, "ranked", 1, limit)


A = ("<new1>", "belief", 0.5)
B = ("<new2>", "knowledge", 0.5)


def test_equal_scores_in_another_order_agree_and_so_does_their_text() -> None:
    left = seen(recall([A, B], text(("<new1>", "belief"), ("<new2>", "knowledge"))), 10)
    right = seen(recall([B, A], text(("<new2>", "knowledge"), ("<new1>", "belief"))), 10)
    assert tie_only(left, right)


def test_an_item_given_another_items_lines_is_a_difference() -> None:
    left = seen(recall([A, B], text(("<new1>", "belief"), ("<new2>", "knowledge"))), 10)
    right = seen(recall([B, A], text(("<new2>", "belief"), ("<new1>", "knowledge"))), 10)
    assert not tie_only(left, right)


def test_which_equal_result_made_a_full_page_may_differ() -> None:
    left = seen(recall([A], text(("<new1>", "belief"))), 1)
    right = seen(recall([B], text(("<new2>", "knowledge"))), 1)
    assert tie_only(left, right)


def test_the_error_flag_never_may() -> None:
    left = seen(recall([A], text(("<new1>", "belief"))), 1)
    right = seen(recall([B], text(("<new2>", "knowledge")), error=True), 1)
    assert not tie_only(left, right)


def test_generated_ids_are_named_alike_whatever_order_the_stores_list_them_in() -> None:
    """Two stores generate different random ids, so a scroll (ordered by id) lists two
    generated records in either order; their names must not follow that order (a swap
    of two generated names failed the property once, with nothing hidden shown)."""
    from tests.noninterference.harness import Namer

    first, second = "1" * 8 + "-0000-4000-8000-" + "0" * 12, "f" * 8 + "-0000-4000-8000-" + "0" * 12
    known = "a" * 8 + "-0000-4000-8000-" + "0" * 12

    def page(old: str, new: str) -> dict[str, Any]:
        # The earlier version and the one a set_payload made of it, ordered by id.
        points = [
            {"id": old, "payload": {"of": known, "status": "superseded"}},
            {"id": new, "payload": {"of": known, "supersedes": old}},
        ]
        return {"points": sorted(points, key=lambda p: p["id"])}

    a, b = page(first, second), page(second, first)
    as_sets = [
        sorted(
            json.dumps(p, sort_keys=True)
            for p in Namer({known: "base#0"}).fresh(x).normal(x)["points"]
        )
        for x in (a, b)
    ]
    assert as_sets[0] == as_sets[1]
