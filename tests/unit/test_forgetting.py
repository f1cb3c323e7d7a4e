"""What a forget rule matches in a record, and the record masked (writes/forgetting.py)."""

from __future__ import annotations

import pytest

from sidecar.writes.forgetting import MASK, Matcher, carried, redacted, shape_regex

pytestmark = pytest.mark.unit


def value(v: str) -> Matcher:
    return Matcher(rule_id="r", kind="value", subject="alice", value=v)


def pattern(p: str) -> Matcher:
    return Matcher(rule_id="r", kind="pattern", subject="alice", pattern=p)


def test_a_value_is_found_as_written_in_any_ascii_case() -> None:
    assert value("Rex").spans("rex and REX and Rexford") == [(0, 3), (8, 11), (16, 19)]
    assert value("5532").spans("no pin here") == []


def test_every_text_field_is_masked_and_nothing_else() -> None:
    record = {
        "content": "alice says her PIN is 5532",
        "proposition": {"text": "PIN 5532", "value": "5532", "key": "pin.5532"},
        "source_id": "chat-5532",
    }
    masked = redacted(record, [value("5532")])
    assert masked["content"] == f"alice says her PIN is {MASK}"
    assert masked["proposition"] == {"text": f"PIN {MASK}", "value": MASK, "key": "pin.5532"}
    assert masked["source_id"] == "chat-5532"
    assert str(record["content"]).endswith("5532")  # the input is left as it was
    assert carried([value("5532")], masked) == []


def test_a_number_as_the_value_is_matched_and_masked_whole() -> None:
    record = {"content": "noted", "proposition": {"text": "the PIN", "value": 5532}}
    assert carried([value("5532")], record)
    assert redacted(record, [value("5532")])["proposition"]["value"] == MASK
    assert redacted(record, [value("9999")])["proposition"]["value"] == 5532
    flag = {"proposition": {"value": True}}
    assert not carried([value("True")], flag)


def test_overlapping_matches_mask_once() -> None:
    assert redacted({"content": "x 55532 y"}, [value("555"), value("5553")])["content"] == (
        f"x {MASK}2 y"
    )


def test_a_pattern_matches_whole_words_only() -> None:
    rule = pattern("###-####")
    assert rule.spans("call 555-0142, not 1555-01420 or 555-01423") == [(5, 13)]
    assert pattern("@@##").spans("AB12 ab12x") == [(0, 4)]


def test_a_pattern_outside_the_shape_never_compiles() -> None:
    for bad in ("(a*)*b[", "#{2}", "a|b", "#" * 65, "\\d"):
        assert shape_regex(bad) is None, bad
    assert pattern("[#]").spans("[1]") == []


def test_a_key_rule_matches_the_proposition_key_only() -> None:
    rule = Matcher(rule_id="r", kind="key", subject="alice", key="pin")
    assert rule.carried_by({"proposition": {"key": "pin"}})
    assert not rule.carried_by({"content": "pin", "proposition": {"key": "pins"}})
    assert rule.spans("pin") == []


def test_a_text_that_makes_regexes_backtrack_is_matched() -> None:
    """A shape has no repetition, so the worst text for a backtracking engine (a long
    run of what the pattern wants, then a miss) costs at most the shape's length per
    offset (an exponential pattern would not finish here)."""
    text = "1" * 200_000 + "x"
    assert pattern("#" * 64).spans(text) == []
    assert value("1" * 63 + "x").spans(text) == [(200_000 - 63, 200_001)]
