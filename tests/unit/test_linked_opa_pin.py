"""OPA linked into the sidecar is the OPA the rest of the project pins: the library's
Go module (native/linkedopa/go.mod) requires the very version the Makefile builds the
`opa` binary from, so the policy tested with `opa test` is evaluated by the same code."""

from __future__ import annotations

import re

from tests.conftest import REPO


def test_the_linked_library_pins_the_makefiles_opa() -> None:
    makefile = (REPO / "Makefile").read_text()
    go_mod = (REPO / "native" / "linkedopa" / "go.mod").read_text()
    pinned = re.search(r"^OPA_VERSION := (v\S+)$", makefile, re.MULTILINE)
    required = re.search(r"^require github.com/open-policy-agent/opa (v\S+)$", go_mod, re.M)
    assert pinned is not None
    assert required is not None
    assert required.group(1) == pinned.group(1)
    go_sum = (REPO / "native" / "linkedopa" / "go.sum").read_text()
    assert f"github.com/open-policy-agent/opa {pinned.group(1)} h1:" in go_sum
