"""A candidate policy's bundle as a policy admin uploads it (policy/candidate.py
`unpack`): what it bounds before anything is written, and what it never writes. What
the engine that evaluates it is denied: tests/integration/test_candidate.py."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from sidecar.errors import CandidateRefused
from sidecar.policy import candidate
from sidecar.policy.candidate import unpack


def _bundle(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_every_member_counts_toward_the_size_bound(tmp_path: Path) -> None:
    """A member that is not kept is still decompressed to skip it: a small upload of
    zeros (kilobytes) is refused, not inflated to gigabytes."""
    too_much = b"\0" * (candidate.MAX_BYTES + 1)
    bundle = _bundle({"whose/p.rego": b"package whose.p\n", "padding.bin": too_much})
    assert len(bundle) < 100_000
    with pytest.raises(CandidateRefused, match="too large"):
        unpack(bundle, tmp_path)


def test_the_count_is_bounded_before_the_archive_is_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused on the header past the bound, never after listing them all: a bundle
    of empty members compresses about a thousand headers to a kilobyte."""
    monkeypatch.setattr(candidate, "MAX_FILES", 10)
    bundle = _bundle({f"f{i}.txt": b"" for i in range(50)})
    read: list[int] = []
    real_next = tarfile.TarFile.next

    def counted(self: tarfile.TarFile) -> tarfile.TarInfo | None:
        read.append(1)
        return real_next(self)

    monkeypatch.setattr(tarfile.TarFile, "next", counted)
    with pytest.raises(CandidateRefused, match="too many files"):
        unpack(bundle, tmp_path)
    # tarfile.open reads the first header itself.
    assert len(read) <= 12


def test_a_path_both_file_and_folder_is_refused(tmp_path: Path) -> None:
    bundle = _bundle({"a.rego": b"package a\n", "a.rego/b.rego": b"package b\n"})
    with pytest.raises(CandidateRefused):
        unpack(bundle, tmp_path)


@pytest.mark.parametrize(
    "member",
    [
        lambda: _link("x.rego", tarfile.SYMTYPE, "/etc/passwd"),
        lambda: _link("x.rego", tarfile.LNKTYPE, "/etc/passwd"),
    ],
    ids=["symlink", "hardlink"],
)
def test_links_are_never_followed(member, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.addfile(member())
        data = b"package whose.p\n"
        info = tarfile.TarInfo("whose/p.rego")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    unpack(buffer.getvalue(), tmp_path / "out")
    assert not (tmp_path / "out" / "x.rego").exists()


def _link(name: str, kind: bytes, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def test_not_gzip_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CandidateRefused):
        unpack(gzip.compress(b"not a tar") + b"junk", tmp_path)
