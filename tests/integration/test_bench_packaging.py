"""`whose bench` is packaged outside the runtime: serving never imports it (nor its
dev-only libraries), and without the `bench` extra the command says what to install.

Each check runs in a fresh interpreter, so what this test session already imported
cannot hide an import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

RUNTIME = ["sidecar.http.app", "sidecar.serving", "sidecar.workers", "sidecar.cli"]


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_serving_imports_no_bench_module_and_no_plotting_library() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {RUNTIME!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    result = python(code)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert "sidecar.http.app" in loaded  # the probe did import the runtime
    leaked = [
        name
        for name in loaded
        if name.startswith(("sidecar.bench", "matplotlib")) or name == "sidecar.benchmark"
    ]
    assert leaked == []


def _bench_without(module: str) -> subprocess.CompletedProcess[str]:
    # An install without the extra lacks the distribution, and importing it raises
    # ModuleNotFoundError naming the module. A `None` entry in sys.modules makes the
    # import machinery raise exactly that (same class, same `name`) without removing
    # the package from the shared virtualenv the other tests use.
    code = (
        "import sys\n"
        f"sys.modules[{module!r}] = None\n"
        "from sidecar.cli import app\n"
        "app(['bench', '--records', '100', '--queries', '5', '--out', '/nonexistent/out'])\n"
    )
    return python(code)


@pytest.mark.parametrize("module", ["matplotlib", "httpx", "wardowl"])
def test_bench_without_the_extra_says_what_to_install(module: str) -> None:
    result = _bench_without(module)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip() == f"whose bench needs {module}: install whose[bench]"


def test_a_fault_of_the_bench_code_itself_is_not_passed_off_as_a_missing_extra() -> None:
    result = _bench_without("sidecar.bench.corpus")
    assert result.returncode != 0
    assert "install whose[bench]" not in result.stderr
    assert "sidecar.bench.corpus" in result.stderr
