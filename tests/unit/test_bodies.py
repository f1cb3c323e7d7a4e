"""Request bodies parsed by pydantic-core's parser (sidecar/http/bodies.py) read as the
standard library reads them: the same value, or the same error, for any bytes; and every
route that takes a JSON body parses it that way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fastapi.routing import APIRoute
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.http.app import create_app
from sidecar.http.bodies import JsonRoute, parsed
from sidecar.settings import Settings

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


def outcome(read: Any, body: bytes) -> str:
    # repr tells 1 from 1.0 and -0.0 from 0.0, and writes NaN the same each time.
    try:
        return "value " + repr(read(body))
    except (ValueError, RecursionError) as exc:
        return f"{type(exc).__name__} {exc}"


@settings(max_examples=400, deadline=None)
@given(values, st.sampled_from(["utf-8", "utf-16", "utf-32"]), st.booleans())
def test_a_json_text_reads_as_the_standard_library_reads_it(
    value: Any, encoding: str, ascii_only: bool
) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode(encoding, errors="surrogatepass")
    assert outcome(parsed, body) == outcome(json.loads, body)


@settings(max_examples=400, deadline=None)
@given(values, st.binary(max_size=8), st.integers(min_value=0))
def test_any_bytes_read_or_fail_as_the_standard_library_reads_them(
    value: Any, noise: bytes, at: int
) -> None:
    text = json.dumps(value).encode()
    at %= len(text) + 1
    body = text[:at] + noise + text[at:]
    assert outcome(parsed, body) == outcome(json.loads, body)


def test_edge_cases_the_two_parsers_split_on_read_as_the_standard_library_reads_them() -> None:
    for body in [
        b'{"query": "\\ud800"}',  # a lone surrogate escape
        b"\xef\xbb\xbf{}",  # a byte-order mark
        b"[" * 300 + b"]" * 300,  # deeper than pydantic-core's parser goes
        b"[" * 20_000 + b"]" * 20_000,  # deeper than the standard library's
        b'{"vector": [NaN, Infinity, -Infinity]}',
        b'{"query": "\xff"}',
    ]:
        assert outcome(parsed, body) == outcome(json.loads, body), body[:40]


def _routes(routes: list[Any]) -> Iterator[Any]:
    for route in routes:
        if hasattr(route, "original_router"):  # an included router (FastAPI keeps them nested)
            yield from _routes(route.original_router.routes)
        else:
            yield route


def test_every_route_that_takes_a_json_body_parses_it_with_pydantic_core() -> None:
    app = create_app(Settings(dev=True))
    routes = [r for r in _routes(app.routes) if isinstance(r, APIRoute)]
    bodied = [r for r in routes if r.body_field is not None]
    assert len(bodied) > 20
    # A console form is not JSON.
    slow = sorted(r.path for r in bodied if not isinstance(r, JsonRoute))
    assert [p for p in slow if not p.startswith("/console")] == []
