"""The door every surface is reached through (memory.py, points.py, oversight.py,
stack_paths.py): a refusal on its way out to whichever transport asked is noted once,
logged if the sidecar could not answer and counted if the policy could not."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from sidecar import metrics
from sidecar.errors import PolicyUnavailable, Unavailable, WhoseError

log = logging.getLogger("whose")

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=type)


# Set on a refusal once it is noted: one that passes several doors (a surface method
# that calls another) is noted at the first.
_NOTED = "_whose_noted"


def _noted(method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    @functools.wraps(method)
    async def noted(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except WhoseError as exc:
            if not getattr(exc, _NOTED, False):
                setattr(exc, _NOTED, True)
                note_refusal(exc)
            raise

    return noted


def note_refusal(exc: WhoseError) -> None:
    """What a refusal leaves behind besides its answer: an Unavailable logged (its
    message, which may name internals, is for the log alone), a PolicyUnavailable
    counted (whose_policy_unavailable_total)."""
    if isinstance(exc, Unavailable):
        if isinstance(exc, PolicyUnavailable):
            metrics.POLICY_UNAVAILABLE.inc()
        log.error("%s: %s", exc.code, exc)


def door(cls: C) -> C:
    """A surface as transports reach it: every public method's refusal noted (`note_refusal`) once,
    on its way out to whichever transport asked."""
    for name, method in inspect.getmembers(cls, inspect.iscoroutinefunction):
        if not name.startswith("_"):
            setattr(cls, name, _noted(method))
    return cls
