"""The comparison the property relies on, on MCP answers: relaxed exactly where the
answer's own order is free (equal scores, generated ids), strict everywhere else."""

from __future__ import annotations

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
