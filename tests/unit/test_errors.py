"""The error tree: every refusal the core raises is a WhoseError with a code of its
own, and the HTTP and MCP transports word each the same way (errors.py)."""

from __future__ import annotations

import importlib
import pkgutil

import sidecar
from sidecar.errors import NotFound, WhoseError


def every_error() -> list[type[WhoseError]]:
    for module in pkgutil.walk_packages(sidecar.__path__, "sidecar."):
        if not module.name.startswith("sidecar.bench") and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: list[type[WhoseError]] = []
    todo: list[type[WhoseError]] = [WhoseError]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(current.__subclasses__())
    return found


def test_each_refusal_has_its_own_code_and_an_error_status() -> None:
    errors = every_error()
    names = {error.__name__ for error in errors}
    # The core's refusals are in the tree, not beside it.
    assert {"StoreUnavailable", "PolicyUnavailable", "LockUnavailable", "WriteRefused"} <= names
    codes = [error.code for error in errors]
    assert len(codes) == len(set(codes)), codes
    assert all(400 <= error.status <= 599 for error in errors if error is not WhoseError)


def test_not_found_says_nothing_but_its_code() -> None:
    assert NotFound("memory", ["anything"]).body() == {"error": "not_found"}
