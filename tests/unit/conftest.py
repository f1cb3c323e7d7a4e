"""Unit tests start no process (the kinds, tests/conftest.py): one that tries fails here,
and belongs in tests/integration."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a unit test started a process: {args[1:2]}; move it to integration")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
