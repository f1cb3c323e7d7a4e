"""`whose bench --variant NAME@REV`: a revision of this repository served from a git
worktree beside the others (sidecar/bench/sweep.py), refused before any measuring when
it is not a commit, or when it differs from this tree in what the worktree borrows."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sidecar.bench import sweep
from sidecar.settings import REPO_ROOT


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_revision_of_this_tree_is_served_from_a_worktree_removed_afterwards(
    tmp_path: Path,
) -> None:
    variants = sweep.parse_variants(["before@HEAD:WHOSE_LOG_LEVEL=INFO", "after:"])
    assert variants == {"before@HEAD": {"WHOSE_LOG_LEVEL": "INFO"}, "after": {}}
    with sweep.sources(variants, tmp_path) as trees:
        assert trees["after"] == REPO_ROOT
        tree = trees["before@HEAD"]
        assert tree != REPO_ROOT
        assert (tree / "sidecar" / "http" / "bodies.py").is_file()
        assert (tree / "bin").resolve() == (REPO_ROOT / "bin").resolve()
        assert _git("-C", str(tree), "rev-parse", "HEAD") == _git("rev-parse", "HEAD")
    assert not tree.exists()
    assert str(tree) not in _git("worktree", "list")


def test_a_revision_that_is_not_a_commit_or_differs_in_what_it_borrows_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A repository of its own, two commits apart in requirements.lock and in a file the
    # worktree does not borrow: the first is refused, the second served.
    repo = tmp_path / "repo"
    repo.mkdir()

    def commit(path: str, text: str) -> str:
        (repo / path).write_text(text)
        _git("-C", str(repo), "add", path)
        _git("-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", path)
        return _git("-C", str(repo), "rev-parse", "HEAD")

    _git("-C", str(repo), "init", "-q")
    pinned = commit("requirements.lock", "fastapi==1\n")
    commit("requirements.lock", "fastapi==2\n")
    documented = commit("README.md", "words\n")
    monkeypatch.setattr(sweep, "REPO_ROOT", repo)
    with pytest.raises(ValueError, match="is not a commit"):
        sweep.parse_variants(["old@no-such-revision:"])
    with pytest.raises(ValueError, match=r"differs from this tree in requirements\.lock"):
        sweep.parse_variants([f"old@{pinned}:"])
    commit("README.md", "other words\n")
    assert sweep.parse_variants([f"old@{documented}:"]) == {f"old@{documented}": {}}
