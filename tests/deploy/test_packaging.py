"""How whose is installed: compatible ranges in pyproject.toml, exact pins in the lock,
a client that brings no server, `make serve` without the test toolchain, one version."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import sidecar
from tests.conftest import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
LOCK = {
    canonicalize_name(name): version
    for name, version in (
        line.split("==", 1)
        for line in (REPO / "requirements.lock").read_text().splitlines()
        if "==" in line
    )
}
# What the client must never bring (issue 36): the server's framework, store, numpy.
SERVER_ONLY = {"fastapi", "uvicorn", "qdrant-edge-py", "qdrant-client", "numpy", "redis", "mcp"}


def requirements() -> list[Requirement]:
    listed = PROJECT["dependencies"] + [
        r for extra in PROJECT["optional-dependencies"].values() for r in extra
    ]
    return [Requirement(r) for r in listed if not r.startswith("whose[")]


def test_every_dependency_is_a_range_the_lock_pins_inside() -> None:
    for requirement in requirements():
        name = canonicalize_name(requirement.name)
        operators = {spec.operator for spec in requirement.specifier}
        assert not operators & {"==", "==="}, requirement
        assert ">=" in operators, f"{requirement}: no lower bound"
        assert name in LOCK, f"{requirement.name} is not pinned in requirements.lock"
        assert requirement.specifier.contains(LOCK[name]), (str(requirement), LOCK[name])


def closure(names: set[str]) -> set[str]:
    """The distributions `names` need, transitively (no extras, markers as here)."""
    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return seen


def test_the_client_needs_only_the_package_s_own_dependencies() -> None:
    """`pip install whose[client]` installs the base dependencies: they (and what they
    need) must cover every module the client imports, and hold nothing of the server."""
    base = closure({Requirement(r).name for r in PROJECT["dependencies"]})
    assert not base & SERVER_ONLY, base & SERVER_ONLY
    assert PROJECT["optional-dependencies"]["client"] == []
    # A fresh interpreter: what this test session imported cannot hide an import.
    probe = (
        "import json, sys\n"
        "import sidecar.client, sidecar.client.text\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    imported = set(json.loads(done.stdout)) - set(sys.stdlib_module_names) - {"sidecar"}
    owners = metadata.packages_distributions()
    needed = {
        canonicalize_name(dist)
        for module in imported
        if not module.startswith("_")
        for dist in owners.get(module, [])
    }
    # httpx imports its optional command-line helpers (click, rich, pygments) only when
    # they are installed; without them (a client-only install) it does not.
    optional = {"click", "rich", "pygments", "brotli", "zstandard", "cryptography"}
    assert needed - base - optional == set()


def test_serve_installs_the_server_and_test_installs_the_toolchain() -> None:
    """What `make serve` would run in a fresh checkout (make -n: nothing is run)."""
    dry = subprocess.run(
        ["make", "-n", "-B", "serve"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert "-e '.[server]'" in dry
    assert "[dev]" not in dry
    assert "pytest" not in dry
    assert "install-opa.sh" not in dry  # the linked evaluator is enough to serve
    dry = subprocess.run(
        ["make", "-n", "-B", "install-dev"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert "-e '.[dev]'" in dry
    assert "install-opa.sh" in dry


def test_the_version_is_written_once() -> None:
    assert "version" not in PROJECT
    assert "version" in PROJECT["dynamic"]
    assert metadata.version("whose") == sidecar.__version__
    found = [
        path
        for path in (REPO / "sidecar").rglob("*.py")
        if re.search(r"""^__version__\s*=""", path.read_text(), re.M)
    ]
    assert found == [REPO / "sidecar" / "__init__.py"]
