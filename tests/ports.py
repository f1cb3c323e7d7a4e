"""Free loopback ports for the processes tests start, and starting again when one was
taken: a port free when drawn may be taken before the process binds it (by any
process on the machine: an outgoing connection's ephemeral port is one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sidecar.bench.processes import free_port as free_port
from sidecar.bench.processes import free_ports as free_ports

T = TypeVar("T")

ATTEMPTS = 5


class PortTaken(RuntimeError):
    """A process did not start: a port drawn for it was taken meanwhile."""


def says_port_taken(log: str) -> bool:
    """Whether a process that exited said its port was in use (OPA, Redis and Qdrant
    say "address already in use", each in its own case)."""
    return "address already in use" in log.lower()


def until_ports_hold(start: Callable[[], T], redraw: Callable[[], None] = lambda: None) -> T:
    """`start()`, again after `redraw()` each time it raises PortTaken, at most ATTEMPTS
    times in all (a `start` that draws its own ports needs no `redraw`)."""
    for attempt in range(ATTEMPTS):
        try:
            return start()
        except PortTaken:
            if attempt == ATTEMPTS - 1:
                raise
            redraw()
    raise AssertionError("unreachable")
