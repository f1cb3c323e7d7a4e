"""What a standing forget rule matches in a record, and the record with it masked:
pure, no I/O (docs/forgetting.md).

The policy never sees a record's claim (policy/contract.py), so finding which rules
a record carries is the sidecar's, here, and deciding what becomes of it is the
policy's (`whose.forgetting`). Matching is over the claim's text: `content`,
`proposition.text` and a textual `proposition.value`; a document's metadata is not
matched (the policy never sees it either; docs/forgetting.md says so).

Every match runs in time linear in the text: a value is a literal found by
`str.find` (ASCII letters in either case, so the lowering keeps every offset); a
pattern is a shape of at most 64 characters, each a digit class, a letter class or
itself, with no repetition, alternation or group: its regular expression has a
fixed length and no two ways to match a character, so a match attempt at each offset
costs at most the shape's length, whatever the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# What a masked value reads as: the agent can say it was asked to forget.
MASK = "[forgotten]"
# The shape of a pattern the sidecar compiles (the policy vets a stricter one:
# rego/whose/forgetting/); anything else never becomes a regular expression.
_SHAPE = re.compile(r"[#@A-Za-z0-9 .:/+()-]{1,64}")
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# A pattern matches whole words: no letter or digit right before or after it.
_EDGE = "[0-9A-Za-z]"


@dataclass(frozen=True)
class Matcher:
    """One rule as the sidecar matches it (ForgetRule: kind, value, key, pattern)."""

    rule_id: str
    kind: str
    subject: str
    value: str | None = None
    key: str | None = None
    pattern: str | None = None

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the value or the pattern occurs in `text` (none for a key rule)."""
        if self.kind == "value" and self.value:
            return _literal_spans(text, self.value)
        if self.kind == "pattern" and self.pattern:
            compiled = shape_regex(self.pattern)
            return [m.span(1) for m in compiled.finditer(text)] if compiled else []
        return []

    def carried_by(self, payload: dict[str, Any], text: Sequence[str] | None = None) -> bool:
        """Whether the record carries what the rule forgets (binding it is the policy's);
        `text`: its `texts`, when the caller has them already."""
        if self.kind == "key":
            proposition = payload.get("proposition") or {}
            return self.key is not None and proposition.get("key") == self.key
        return any(self.spans(t) for t in (texts(payload) if text is None else text))


def shape_regex(pattern: str) -> re.Pattern[str] | None:
    """A pattern's expression: fixed length, character classes and literals only,
    whole-word; None for anything outside the shape."""
    if not _SHAPE.fullmatch(pattern):
        return None
    body = "".join(
        "[0-9]" if c == "#" else "[A-Za-z]" if c == "@" else re.escape(c) for c in pattern
    )
    return re.compile(f"(?<!{_EDGE})({body})(?!{_EDGE})")


def _literal_spans(text: str, value: str) -> list[tuple[int, int]]:
    haystack, needle = text.translate(_LOWER), value.translate(_LOWER)
    found: list[tuple[int, int]] = []
    start = haystack.find(needle)
    while start >= 0:
        found.append((start, start + len(needle)))
        start = haystack.find(needle, start + len(needle))
    return found


def texts(payload: dict[str, Any]) -> list[str]:
    """The claim's text fields of a record (the ones a rule is matched against); a
    number as a value is matched as it is written in JSON (5532 as "5532")."""
    proposition = payload.get("proposition") or {}
    found = [payload.get("content"), proposition.get("text"), _as_text(proposition.get("value"))]
    return [t for t in found if isinstance(t, str)]


def _as_text(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    return value if isinstance(value, str) else str(value)


def carried(matchers: Sequence[Matcher], payload: dict[str, Any]) -> list[Matcher]:
    """The rules a record carries. Every write is matched against every standing rule
    of its tenant: the text is lowered once, and a value is looked for with `in`."""
    text = texts(payload)
    lowered = [t.translate(_LOWER) for t in text]
    found = []
    for m in matchers:
        if m.kind == "value" and m.value:
            needle = m.value.translate(_LOWER)
            hit = any(needle in t for t in lowered)
        else:
            hit = m.carried_by(payload, text)
        if hit:
            found.append(m)
    return found


def redacted(payload: dict[str, Any], matchers: Iterable[Matcher]) -> dict[str, Any]:
    """The record with every span the rules match masked, in each text field."""
    rules = list(matchers)
    out = dict(payload)
    if isinstance(out.get("content"), str):
        out["content"] = _masked(out["content"], rules)
    proposition = out.get("proposition")
    if isinstance(proposition, dict):
        proposition = dict(proposition)
        if isinstance(proposition.get("text"), str):
            proposition["text"] = _masked(proposition["text"], rules)
        value = proposition.get("value")
        if isinstance(value, str):
            proposition["value"] = _masked(value, rules)
        elif (number := _as_text(value)) is not None and _masked(number, rules) != number:
            proposition["value"] = MASK  # a number cannot hold a mask: the whole value
        out["proposition"] = proposition
    return out


def concealed(payload: dict[str, Any]) -> dict[str, Any]:
    """The record with each text field masked whole: for a writer who is not the
    rule's subject, a mask in place would show where the value sat in what they sent."""
    out = dict(payload)
    if isinstance(out.get("content"), str):
        out["content"] = MASK
    proposition = out.get("proposition")
    if isinstance(proposition, dict):
        proposition = dict(proposition)
        if isinstance(proposition.get("text"), str):
            proposition["text"] = MASK
        if "value" in proposition and proposition["value"] is not None:
            proposition["value"] = MASK
        out["proposition"] = proposition
    return out


def _masked(text: str, rules: list[Matcher]) -> str:
    """Each run of overlapping matches masked once."""
    merged: list[list[int]] = []
    for start, end in sorted(span for rule in rules for span in rule.spans(text)):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces: list[str] = []
    at = 0
    for start, end in merged:
        pieces += [text[at:start], MASK]
        at = end
    return "".join(pieces) + text[at:]
