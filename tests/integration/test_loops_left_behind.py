"""tests/loops.py: the loop LlamaIndex's `asyncio_run` leaves set is closed, a loop
that was set before the test is left alone, and a fixture's own loop is closed when the
fixture skips before its `yield`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from llama_index.core.async_utils import asyncio_run

from tests.conftest import READY_TIMEOUT_S
from tests.loops import close_loop_left_behind, loop_set, own_loop

REPO = Path(__file__).resolve().parents[2]


async def _answer() -> int:
    return 42


def test_llamaindex_leaves_an_open_loop_set_and_it_is_closed() -> None:
    # A thread no loop was ever set on (a worker whose first test is sync): a fresh
    # policy. Once pytest-asyncio has set and unset its loop, get_event_loop raises
    # instead, and LlamaIndex runs its own loop and closes it.
    outer = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    try:
        assert asyncio_run(_answer()) == 42
        left = loop_set()
        assert left is not None  # what LlamaIndex left
        assert not left.is_closed()
        assert close_loop_left_behind(None)
        assert left.is_closed()
        assert loop_set() is None
    finally:
        asyncio.set_event_loop_policy(outer)


def test_a_loop_set_before_the_test_is_not_closed() -> None:
    outer = loop_set()
    mine = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(mine)
        assert not close_loop_left_behind(mine)
        assert not mine.is_closed()
        assert loop_set() is mine
    finally:
        asyncio.set_event_loop(outer)
        mine.close()


_INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = session
asyncio_default_test_loop_scope = session
filterwarnings = error
"""
# A worker's first test is a sync LlamaIndex call, an async test follows (pytest-asyncio
# sets its loop), and an innocent test collects garbage: the left loop fails it.
_TESTS = """import gc
import pytest
from llama_index.core.async_utils import asyncio_run

async def _one():
    return 1

def test_a_sync_llamaindex_call():
    assert asyncio_run(_one()) == 1

async def test_b_async():
    pass

def test_c_innocent():
    gc.collect()
"""
_CONFTEST = f"""import sys
sys.path.insert(0, {str(REPO)!r})
from tests.conftest import _no_loop_left_behind as _no_loop_left_behind
"""


def _pytest(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=READY_TIMEOUT_S,
    )


def test_a_loop_left_behind_fails_an_innocent_test_unless_the_fixture_closes_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "pytest.ini").write_text(_INI)
    (tmp_path / "test_order.py").write_text(_TESTS)
    bare = _pytest(tmp_path)
    assert bare.returncode == 1, bare.stdout
    assert "FAILED test_order.py::test_c_innocent" in bare.stdout
    assert "unraisable" in bare.stdout  # the unclosed loop, collected in that test
    (tmp_path / "conftest.py").write_text(_CONFTEST)
    guarded = _pytest(tmp_path)
    assert guarded.returncode == 0, guarded.stdout
    assert "3 passed" in guarded.stdout


def test_a_fixture_loop_is_closed_when_the_fixture_skips() -> None:
    with pytest.raises(pytest.skip.Exception), own_loop() as loop:
        pytest.skip("no server")
    assert loop.is_closed()


# A fixture makes its loop, then its store backend skips (no Qdrant binary), as
# tests/noninterference/test_query_engine.py's did; a later test collects garbage.
_SKIPPING = """import asyncio, gc, sys
import pytest
sys.path.insert(0, {repo!r})
from tests.loops import own_loop

@pytest.fixture
def bare():
    loop = asyncio.new_event_loop()
    pytest.skip("no server")
    yield loop
    loop.close()

@pytest.fixture
def owned():
    with own_loop() as loop:
        pytest.skip("no server")
        yield loop

def test_a_skipped(FIXTURE):
    pass

def test_b_innocent():
    gc.collect()
"""


@pytest.mark.parametrize(("fixture", "fails"), [("bare", True), ("owned", False)])
def test_a_fixture_loop_made_before_a_skip_fails_an_innocent_test_unless_owned(
    tmp_path: Path, fixture: str, fails: bool
) -> None:
    (tmp_path / "pytest.ini").write_text(_INI)
    tests = _SKIPPING.format(repo=str(REPO)).replace("FIXTURE", fixture)
    (tmp_path / "test_skipping.py").write_text(tests)
    ran = _pytest(tmp_path)
    if fails:
        assert ran.returncode == 1, ran.stdout
        assert "FAILED test_skipping.py::test_b_innocent" in ran.stdout
        assert "unraisable" in ran.stdout  # the unclosed loop and its sockets
    else:
        assert ran.returncode == 0, ran.stdout
        assert "1 passed, 1 skipped" in ran.stdout
