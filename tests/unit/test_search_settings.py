"""WHOSE_SEARCH_* reach the store of either backend (store/__init__.py `Search`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    monkeypatch.setenv("WHOSE_SEARCH_UNPROVEN_EXACT_BELOW", "56789")
    settings = Settings(store=backend, data_dir=tmp_path, qdrant_url="http://127.0.0.1:1")
    store = open_store(settings)  # not opened: nothing is contacted
    # The hashing embedder's default weight of BM25 in hybrid search (store/hybrid.py).
    expected = Search(
        exact_below=1234,
        hnsw_ef=96,
        lexical_weight=4.0,
        neighbourhood=True,
        unproven_exact_below=56789,
        # On a server the neighbourhood costs two more round trips: what an exact
        # search of 20 000 points does (store/server.py NEIGHBOURHOOD_ABOVE).
        neighbourhood_above=20_000 if backend == "server" else 10_000,
        # The sieve is the embedded engine's (store/planner.py).
        sieve=backend == "edge",
    )
    assert store.search_tuning == expected  # type: ignore[attr-defined]
    monkeypatch.setenv("WHOSE_SEARCH_SIEVE", "false")
    unsifted = Settings(store=backend, data_dir=tmp_path, qdrant_url="http://127.0.0.1:1")
    assert open_store(unsifted).search_tuning.sieve is False  # type: ignore[attr-defined]


def test_the_lexical_weight_follows_the_embedder_unless_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model: dict[str, Any] = {
        "embed_model_dir": tmp_path / "model",
        "embed_model": "m",
        "data_dir": tmp_path,
    }
    assert open_store(Settings(**model)).search_tuning.lexical_weight == 1.0  # type: ignore[attr-defined]
    monkeypatch.setenv("WHOSE_LEXICAL_WEIGHT", "0.7")
    assert open_store(Settings(**model)).search_tuning.lexical_weight == 0.7  # type: ignore[attr-defined]


def test_by_default_a_search_is_exact_up_to_20000_matching_points() -> None:
    assert Settings().search_exact_below == 20_000
    assert Settings().search_hnsw_ef is None


def test_by_default_the_planner_looks_around_and_an_unproven_search_is_exact_to_200000() -> None:
    assert Settings().search_neighbourhood is True
    assert Settings().search_unproven_exact_below == 200_000
