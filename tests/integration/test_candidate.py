"""What a candidate policy's engine is denied (policy/candidate.py, native/linkedopa
`confined`), linked in and as a local OPA server. The uploader chooses the Rego: a
candidate that could reach the network or read the sidecar's environment would put
its secrets (the JWT key, in `opa.runtime().env`) or every tenant's points (the Qdrant
server, through `http.send`) into the reasons the impact report shows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sidecar.errors import CandidateRefused
from sidecar.policy.candidate import Candidates, pack
from sidecar.settings import Settings
from tests.conftest import OPA_BINARY, POLICY_DIR


def _policy_with(tmp_path: Path, rego: str) -> bytes:
    """The shipped policy, with one more module."""
    folder = tmp_path / "policy"
    shutil.copytree(POLICY_DIR, folder)
    (folder / "whose" / "extra.rego").write_text(rego)
    return pack(folder)


# Each reaches outside the evaluation; the second is spelled so no text search finds it.
REACHING_OUT = {
    "http.send": 'package whose.extra\nleak := http.send({"method": "get", "url": "http://127.0.0.1:9/"})\n',
    "http.send, escaped": (
        'package whose.extra\nleak := http["s\\u0065nd"]({"method": "get", "url": "http://127.0.0.1:9/"})\n'
    ),
    "opa.runtime": "package whose.extra\nleak := opa.runtime().env\n",
    "net.lookup_ip_addr": 'package whose.extra\nleak := net.lookup_ip_addr("example.com")\n',
}


def _candidates(kind: str, tmp_path: Path) -> Candidates:
    # The library as configured (WHOSE_OPA_LIBRARY, else bin/'s, as tests.conftest's).
    library = Settings().opa_library
    return Candidates(kind, library, OPA_BINARY, 5.0, tmp_path / "scratch")  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["linked", "server"])
@pytest.mark.parametrize("rego", REACHING_OUT.values(), ids=REACHING_OUT.keys())
async def test_a_candidate_cannot_reach_outside_the_evaluation(
    kind: str, rego: str, tmp_path: Path
) -> None:
    with pytest.raises(CandidateRefused) as refused:
        async with _candidates(kind, tmp_path).open(_policy_with(tmp_path, rego)):
            pass
    assert "not_loadable" in refused.value.reasons


@pytest.mark.parametrize("kind", ["linked", "server"])
async def test_the_shipped_policy_loads_confined(kind: str, tmp_path: Path) -> None:
    async with _candidates(kind, tmp_path).open(pack(POLICY_DIR)) as engine:
        assert engine is not None
