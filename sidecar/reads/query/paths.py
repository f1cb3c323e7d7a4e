"""Payload paths as Qdrant reads them: `a.b`, `a[].b`, `a[0]`.

The values a path selects in one point's payload, for what the engine reads itself
(group keys, facet values): a key of an object, an element of a list by index, every
element by `[]`; a list the whole path selects counts as its elements (one level),
as Qdrant does. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_PART = re.compile(r"(?P<key>[^.\[\]]+)|\[(?P<index>\d*)\]|(?P<dot>\.)")


def values_at(payload: Mapping[str, Any], path: str) -> list[Any]:
    found: list[Any] = [payload]
    for kind, value in _parts(path):
        selected: list[Any] = []
        for data in found:
            if kind == "key" and isinstance(data, Mapping) and value in data:
                selected.append(data[value])
            elif kind == "index" and isinstance(data, list) and int(value) < len(data):
                selected.append(data[int(value)])
            elif kind == "all" and isinstance(data, list):
                selected.extend(data)
        found = selected
    values: list[Any] = []
    for data in found:
        values.extend(data if isinstance(data, list) else [data])
    return values


def _parts(path: str) -> list[tuple[str, str]]:
    parts: list[tuple[str, str]] = []
    for match in _PART.finditer(path):
        if match.group("key") is not None:
            parts.append(("key", match.group("key")))
        elif match.group("index") is not None:
            index = match.group("index")
            parts.append(("index", index) if index else ("all", ""))
    return parts
