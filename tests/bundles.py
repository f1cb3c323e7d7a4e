"""Policy bundles as production ships them: built by `opa build` with a revision,
served over HTTP, polled and activated by a real OPA.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from tests.conftest import OPA_BINARY, POLICY_DIR, start_opa


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def bundle_server(folder: Path) -> Iterator[str]:
    """A loopback HTTP server for the files in `folder` (OPA's bundle service)."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def policy_copy(folder: Path) -> Path:
    """An editable copy of the project's policies and data, without the tests."""
    shutil.copytree(POLICY_DIR, folder, ignore=shutil.ignore_patterns("*_test.rego"))
    return folder


def publish(source: Path, revision: str, served: Path) -> None:
    """Build `source` into served/bundle.tar.gz; replaced atomically, as a CDN would."""
    partial = served / "bundle.tar.gz.partial"
    subprocess.run(
        [
            str(OPA_BINARY),
            "build",
            "--bundle",
            str(source),
            "--revision",
            revision,
            "--output",
            str(partial),
        ],
        check=True,
        capture_output=True,
    )
    partial.replace(served / "bundle.tar.gz")


def start_bundle_opa(
    service_url: str, log: Path, port: int | None = None
) -> tuple[str, subprocess.Popen[bytes]]:
    """An OPA that takes its policy only from the bundle service, polling every second."""
    settings = {
        "services.policies.url": service_url,
        "bundles.whose.service": "policies",
        "bundles.whose.resource": "bundle.tar.gz",
        "bundles.whose.polling.min_delay_seconds": "1",
        "bundles.whose.polling.max_delay_seconds": "1",
        # Decision logs on, so answers carry a decision id.
        "decision_logs.console": "true",
    }
    extra: list[str] = []
    for key, value in settings.items():
        extra += ["--set", f"{key}={value}"]
    return start_opa(None, log, port=port, extra=tuple(extra))


def active_revision(opa_url: str) -> str | None:
    bundles = httpx.get(f"{opa_url}/v1/data/system/bundles").json().get("result") or {}
    revision = bundles.get("whose", {}).get("manifest", {}).get("revision")
    return revision if isinstance(revision, str) else None


def wait_for_revision(opa_url: str, revision: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if active_revision(opa_url) == revision:
            return
        time.sleep(0.05)
    raise AssertionError(f"OPA did not activate bundle revision {revision}")
