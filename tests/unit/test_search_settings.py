"""WHOSE_SEARCH_* reach the store of either backend (store/__init__.py `Search`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.services import open_store
from sidecar.settings import Settings
from sidecar.store import Search


@pytest.mark.parametrize("backend", ["edge", "server"])
def test_search_settings_reach_the_store(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHOSE_SEARCH_EXACT_BELOW", "1234")
    monkeypatch.setenv("WHOSE_SEARCH_HNSW_EF", "96")
    settings = Settings(store=backend, data_dir=tmp_path, qdrant_url="http://127.0.0.1:1")
    store = open_store(settings)  # not opened: nothing is contacted
    assert store.search_tuning == Search(exact_below=1234, hnsw_ef=96)  # type: ignore[attr-defined]


def test_by_default_a_search_is_exact_up_to_20000_matching_points() -> None:
    assert Settings().search_exact_below == 20_000
    assert Settings().search_hnsw_ef is None
