"""The OPA configuration in deploy/, loaded by the real `opa` binary.

A signed bundle is built from rego/ with scripts/build-bundle.sh, served from a
loopback HTTP server, and OPA is started with the exact flags of deploy/compose.yaml
and of the pod in deploy/k8s (addresses and mounted paths mapped to this machine).
OPA must activate the bundle and answer disclosure queries with it; a bundle signed
with another key, or not signed, must never become active.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import OPA_BINARY, REPO, free_port, stop

COMPOSE = REPO / "deploy" / "compose.yaml"
K8S_DEPLOYMENT = REPO / "deploy" / "k8s" / "deployment.yaml"
K8S_OPA_CONFIG = REPO / "deploy" / "k8s" / "opa-config.yaml"
BUILD_BUNDLE = REPO / "scripts" / "build-bundle.sh"
REVISION = "test-revision-7"

PRIVATE_BELIEF = {
    "id": "r1",
    "tenant": "acme",
    "observer_id": "alice",
    "modality": "reported_belief",
    "source_id": "private-session-42",
    "source": {"kind": "conversation", "speaker": "alice"},
    "audience": ["alice"],
    "valid_at": "2026-10-01T00:00:00Z",
}


def disclosure_input(asker: str) -> dict[str, Any]:
    return {
        "asker": {"id": asker, "tenant": "acme", "groups": [], "roles": [], "scopes": []},
        "audience": [],
        "purpose": "recall",
        "now": "2026-11-30T12:00:00Z",
        "as_of": "2026-11-30T12:00:00Z",
        "records": [PRIVATE_BELIEF],
    }


def key_pair(folder: Path, name: str) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = folder / f"{name}.pem"
    public = folder / f"{name}.pub.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def build_bundle(signing_key: Path, out: Path) -> None:
    env = {**os.environ, "OPA": str(OPA_BINARY)}
    subprocess.run(
        [str(BUILD_BUNDLE), str(signing_key), str(out), REVISION],
        check=True,
        env=env,
        capture_output=True,
    )


@dataclass
class BundleServer:
    folder: Path
    url: str
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def bundle_server(tmp_path: Path) -> Iterator[BundleServer]:
    folder = tmp_path / "served"
    folder.mkdir()
    port = free_port()
    served = BundleServer(folder, f"http://127.0.0.1:{port}")

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            served.requests.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", port), partial(Handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("keys")
    return {"trusted": key_pair(folder, "trusted"), "other": key_pair(folder, "other")}


# --- the two OPA command lines, as deployed ----------------------------------------


def compose_opa() -> tuple[list[str], dict[str, str]]:
    service = yaml.safe_load(COMPOSE.read_text())["services"]["opa"]
    return list(service["command"]), dict(service["environment"])


def k8s_opa() -> tuple[list[str], dict[str, str]]:
    deployment = yaml.safe_load(K8S_DEPLOYMENT.read_text())
    containers = deployment["spec"]["template"]["spec"]["containers"]
    (opa,) = [c for c in containers if c["name"] == "opa"]
    return list(opa["args"]), {e["name"]: e["value"] for e in opa["env"]}


@dataclass
class RunningOpa:
    url: str
    diagnostic_url: str | None
    process: subprocess.Popen[bytes]
    log: Path

    def bundles_healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health?bundles", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False


def start_deployed_opa(
    args: list[str],
    env: dict[str, str],
    paths: dict[str, Path],
    bundle_url: str,
    folder: Path,
) -> RunningOpa:
    """Run OPA with a deployment's own arguments, mapped onto this machine.

    Listen addresses become free loopback ports and container paths the files given
    in `paths`; the bundle server URL points at the test's server. Nothing else changes.
    """
    port = free_port()
    diagnostic: str | None = None
    command = [str(OPA_BINARY)]
    for arg in args:
        flag = arg.partition("=")[0]
        if flag == "--addr":
            arg = f"--addr=127.0.0.1:{port}"
        elif flag == "--diagnostic-addr":
            diagnostic = f"127.0.0.1:{free_port()}"
            arg = f"--diagnostic-addr={diagnostic}"
        else:
            for container_path, host_path in paths.items():
                arg = arg.replace(container_path, str(host_path))
        command.append(arg)
    assert "--config-file" in " ".join(command), "the deployment must pass its config file"
    log = folder / "opa.log"
    environment = {**os.environ, **env, "WHOSE_BUNDLE_SERVER": bundle_url}
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=environment)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"OPA exited:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            httpx.get(f"{url}/health", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    return RunningOpa(url, f"http://{diagnostic}" if diagnostic else None, process, log)


def wait_for(condition: Any, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def k8s_config_file(folder: Path) -> Path:
    config_map = yaml.safe_load(K8S_OPA_CONFIG.read_text())
    path = folder / "config.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    return path


DEPLOYMENTS = ["compose", "k8s"]


@contextmanager
def launch(
    which: str, public_key: Path, server: BundleServer, folder: Path
) -> Iterator[RunningOpa]:
    if which == "compose":
        args, env = compose_opa()
        paths = {
            "/config/config.yaml": REPO / "deploy" / "opa" / "config.yaml",
            "/keys/bundle-verify.pem": public_key,
        }
    else:
        args, env = k8s_opa()
        paths = {
            "/config/config.yaml": k8s_config_file(folder),
            "/etc/whose/trust/bundle-verify.pem": public_key,
        }
    opa = start_deployed_opa(args, env, paths, server.url, folder)
    try:
        yield opa
    finally:
        stop(opa.process)


# --- tests ---------------------------------------------------------------------------


@pytest.mark.parametrize("which", DEPLOYMENTS)
def test_signed_bundle_is_activated_and_decides(
    which: str,
    keys: dict[str, tuple[Path, Path]],
    bundle_server: BundleServer,
    tmp_path: Path,
) -> None:
    signing_key, public_key = keys["trusted"]
    build_bundle(signing_key, bundle_server.folder / "whose.tar.gz")
    with launch(which, public_key, bundle_server, tmp_path) as opa:
        assert wait_for(opa.bundles_healthy), opa.log.read_text(errors="replace")[-3000:]
        assert "/whose.tar.gz" in bundle_server.requests
        bundles = httpx.get(f"{opa.url}/v1/data/system/bundles", timeout=5).json()["result"]
        assert bundles["whose"]["manifest"]["revision"] == REVISION

        def decide(asker: str) -> dict[str, Any]:
            answer = httpx.post(
                f"{opa.url}/v1/data/whose/disclosure/decisions",
                json={"input": disclosure_input(asker)},
                timeout=5,
            ).json()
            decision: dict[str, Any] = answer["result"]["r1"]
            return decision

        assert decide("alice")["allow"] is True
        refused = decide("bob")
        assert refused["allow"] is False
        assert refused["reasons"] == ["audience_excludes:bob"]
        # Decision logs are on: the refusal is logged with the bundle revision.
        assert wait_for(lambda: "audience_excludes:bob" in opa.log.read_text(errors="replace"))
        assert REVISION in opa.log.read_text(errors="replace")
        # Test files are not shipped.
        policies = httpx.get(f"{opa.url}/v1/policies", timeout=5).json()["result"]
        assert policies
        assert not [p for p in policies if p["id"].endswith("_test.rego")]
        # The bundle status metrics deploy/prometheus/alerts.yaml watches.
        metrics = httpx.get(f"{opa.diagnostic_url or opa.url}/metrics", timeout=5).text
        assert re.search(r'^last_success_bundle_request\{name="whose"\} ', metrics, re.M)
        active = rf'^last_success_bundle_activation\{{active_revision="{REVISION}",name="whose"\}} '
        assert re.search(active, metrics, re.M)
        if opa.diagnostic_url:
            # The kubelet's readiness probe, on the read-only diagnostic listener ...
            probe = httpx.get(f"{opa.diagnostic_url}/health?bundles", timeout=5)
            assert probe.status_code == 200
            # ... which serves no policy API.
            data = httpx.post(f"{opa.diagnostic_url}/v1/data/whose", json={}, timeout=5)
            assert data.status_code == 404


@pytest.mark.parametrize("which", DEPLOYMENTS)
@pytest.mark.parametrize("bundle", ["signed_with_another_key", "unsigned"])
def test_untrusted_bundle_is_never_activated(
    which: str,
    bundle: str,
    keys: dict[str, tuple[Path, Path]],
    bundle_server: BundleServer,
    tmp_path: Path,
) -> None:
    out = bundle_server.folder / "whose.tar.gz"
    if bundle == "unsigned":
        subprocess.run(
            [str(OPA_BINARY), "build", "--bundle", ".", "--ignore", "*_test.rego", "-o", str(out)],
            check=True,
            cwd=REPO / "rego",
            capture_output=True,
        )
    else:
        build_bundle(keys["other"][0], out)
    with launch(which, keys["trusted"][1], bundle_server, tmp_path) as opa:
        # OPA fetched the bundle and refused it ...
        assert wait_for(lambda: "/whose.tar.gz" in bundle_server.requests)
        assert wait_for(lambda: "Bundle load failed" in opa.log.read_text(errors="replace"))
        assert not opa.bundles_healthy()
        metrics = httpx.get(f"{opa.diagnostic_url or opa.url}/metrics", timeout=5).text
        assert re.search(r'^bundle_failed_load_counter\{[^}]*name="whose"\} ', metrics, re.M)
        # ... so no policy answers: the sidecar gets no result and discloses nothing.
        answer = httpx.post(
            f"{opa.url}/v1/data/whose/disclosure/decisions",
            json={"input": disclosure_input("alice")},
            timeout=5,
        ).json()
        assert "result" not in answer or answer["result"] in ({}, None)


def compose_healthcheck(opa_url: str) -> list[str]:
    test = yaml.safe_load(COMPOSE.read_text())["services"]["opa"]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "/opa"]
    return [str(OPA_BINARY), *(a.replace("http://127.0.0.1:8181", opa_url) for a in test[2:])]


def test_compose_opa_healthcheck_follows_bundle_activation(
    keys: dict[str, tuple[Path, Path]], bundle_server: BundleServer, tmp_path: Path
) -> None:
    with launch("compose", keys["trusted"][1], bundle_server, tmp_path) as opa:
        # Nothing served yet: OPA is up but has no bundle, so it is not healthy.
        assert wait_for(lambda: "/whose.tar.gz" in bundle_server.requests)
        check = compose_healthcheck(opa.url)
        assert subprocess.run(check, capture_output=True, timeout=30).returncode != 0
        build_bundle(keys["trusted"][0], bundle_server.folder / "whose.tar.gz")
        # OPA retries with back-off; once the bundle is active the same check passes.
        assert wait_for(opa.bundles_healthy, timeout=40)
        assert subprocess.run(check, capture_output=True, timeout=30).returncode == 0
    # And with OPA gone the check fails.
    assert subprocess.run(check, capture_output=True, timeout=30).returncode != 0


def test_an_edited_policy_never_ships_under_the_same_revision(
    keys: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    # The sidecar keys cached decisions by revision: `git describe --dirty` alone named
    # two different uncommitted edits alike, and the second would have been served the
    # first one's decisions.
    import json
    import shutil
    import tarfile

    policy = tmp_path / "rego"
    shutil.copytree(REPO / "rego", policy)
    env = {**os.environ, "OPA": str(OPA_BINARY), "POLICY_DIR": str(policy)}

    def revision_of_a_build(name: str) -> str:
        out = tmp_path / f"{name}.tar.gz"
        subprocess.run(
            [str(BUILD_BUNDLE), str(keys["trusted"][0]), str(out)],
            check=True,
            env=env,
            capture_output=True,
        )
        with tarfile.open(out) as bundle:
            manifest = bundle.extractfile("/.manifest") or bundle.extractfile(".manifest")
            assert manifest is not None
            return str(json.load(manifest)["revision"])

    first = revision_of_a_build("first")
    assert revision_of_a_build("again") == first  # the same content, the same name
    rule = policy / "whose" / "disclosure" / "disclosure.rego"
    rule.write_text(rule.read_text() + "\n# an edit that changes nothing but the file\n")
    assert revision_of_a_build("edited") != first
