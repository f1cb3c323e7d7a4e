"""Event loops a library leaves set on the test's thread, closed when the test ends.

LlamaIndex runs its async code from sync calls with `asyncio_run`
(`llama_index.core.async_utils`), which takes `asyncio.get_event_loop()`: with no loop
set on the thread, that makes one, sets it and never closes it. When a later test sets
another loop, the left one is collected, and its unclosed self-pipe sockets warn inside
whichever test runs then; `filterwarnings = error` turns that into its failure (seen in
`test_own_mem0_snippet` and `test_retrieve_and_get_by_id` on a loaded machine).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


def loop_set() -> asyncio.AbstractEventLoop | None:
    """The loop set on this thread, without making one (`get_event_loop` would)."""
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    return getattr(local, "_loop", None)


def close_loop_left_behind(before: asyncio.AbstractEventLoop | None) -> bool:
    """Close the loop set on this thread if it is not `before` (the one set when the
    test began) and idle, and set `before` back; whether one was closed."""
    left = loop_set()
    if left is None or left is before or left.is_running() or left.is_closed():
        return False
    left.close()
    asyncio.set_event_loop(before)
    return True


@contextmanager
def own_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A fixture's own event loop, closed however the fixture ends. Made before a skip
    (a store backend without its server) or a failure while the fixture sets up, and
    closed only after its `yield`, it was left open, and its collection failed another
    test ("unclosed event loop", seen on a machine without the Qdrant binary)."""
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.close()
