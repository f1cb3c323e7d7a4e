"""deploy/compose.yaml and the Dockerfile, checked without a container engine.

The compose file is parsed and held to what the sidecar needs: every WHOSE_* variable
is a real setting and the values build a production Settings (server store, verified
identity, OPA, Redis); images are pinned; startup waits on healthchecks. The image's
HEALTHCHECK command is run against a real sidecar.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from sidecar.auth.tokens import Authenticator
from sidecar.settings import Settings, is_loopback
from tests.conftest import free_port, ops

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "deploy" / "compose.yaml"
DOCKERFILE = REPO / "Dockerfile"
SETTINGS = {f"WHOSE_{name.upper()}" for name in Settings.model_fields}
# ${NAME}, ${NAME:-default}, ${NAME:?error}: compose interpolation.
INTERPOLATION = re.compile(r"\$\{([A-Z0-9_]+)(?::?[-?][^}]*)?\}")


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def services() -> dict[str, Any]:
    found: dict[str, Any] = compose()["services"]
    return found


def sidecar_env() -> dict[str, str]:
    return {k: str(v) for k, v in services()["sidecar"]["environment"].items()}


def interpolate(value: str, variables: dict[str, str]) -> str:
    return INTERPOLATION.sub(lambda m: variables[m.group(1)], value)


def test_the_stack_has_its_services() -> None:
    assert {"sidecar", "opa", "qdrant", "redis"} <= set(services())


def test_sidecar_env_names_only_real_settings() -> None:
    env = sidecar_env()
    unknown = sorted(name for name in env if name not in SETTINGS)
    assert not unknown, f"not WHOSE_* settings (typo?): {unknown}"


def test_sidecar_runs_in_production_mode() -> None:
    env = sidecar_env()
    required = {"WHOSE_STORE", "WHOSE_QDRANT_URL", "WHOSE_OPA_URL", "WHOSE_REDIS_URL"}
    assert required <= set(env)
    assert env["WHOSE_STORE"] == "server"
    assert env["WHOSE_OPA_URL"] == "http://opa:8181"
    assert env["WHOSE_QDRANT_URL"].startswith("http://qdrant:")
    assert env["WHOSE_REDIS_URL"].startswith("redis://redis:")
    assert env.get("WHOSE_DEV", "false").lower() in {"false", "0"}
    jwt_sources = {"WHOSE_JWT_HS256_SECRET", "WHOSE_JWT_PUBLIC_KEY_FILE", "WHOSE_JWT_JWKS_FILE"}
    assert jwt_sources & set(env), "the sidecar needs a real identity provider"


def test_secrets_come_from_the_environment_and_are_required() -> None:
    env = sidecar_env()
    for name in ("WHOSE_JWT_HS256_SECRET", "WHOSE_QDRANT_API_KEY"):
        match = INTERPOLATION.fullmatch(env[name])
        assert match, f"{name} must be ${{...}} from deploy/.env, never inline"
        assert ":?" in env[name], f"{name} must be required (${{VAR:?message}})"


def test_sidecar_env_builds_production_settings() -> None:
    values = {"WHOSE_JWT_HS256_SECRET": "s" * 32, "WHOSE_QDRANT_API_KEY": "k" * 24}
    env = {k: interpolate(v, values) for k, v in sidecar_env().items()}
    settings = Settings.model_validate(
        {k.removeprefix("WHOSE_").lower(): v for k, v in env.items()}
    )
    assert settings.store == "server"
    assert not settings.dev
    assert not is_loopback(settings.host)
    # The same check `whose serve` makes before serving: an identity provider exists.
    Authenticator(settings)


def test_qdrant_and_sidecar_share_the_api_key() -> None:
    qdrant_key = services()["qdrant"]["environment"]["QDRANT__SERVICE__API_KEY"]
    assert INTERPOLATION.fullmatch(qdrant_key).group(1) == "WHOSE_QDRANT_API_KEY"  # type: ignore[union-attr]


def test_images_are_pinned() -> None:
    for name, service in services().items():
        image = service.get("image")
        assert image, f"{name} has no image"
        tag = image.rpartition(":")[2]
        assert ":" in image, image
        assert tag not in {"latest", "edge", "main", "stable"}, image
        assert re.search(r"\d", tag), f"{name}: {image} is not a version tag"
    assert services()["opa"]["image"] == "openpolicyagent/opa:1.22.3"


def test_startup_waits_for_healthy_dependencies() -> None:
    stack = services()
    for name, service in stack.items():
        assert "healthcheck" in service, f"{name} has no healthcheck"
        for dependency, condition in service.get("depends_on", {}).items():
            assert dependency in stack
            assert condition == {"condition": "service_healthy"}, (name, dependency)
    assert set(stack["sidecar"]["depends_on"]) == {"opa", "qdrant", "redis"}


def test_opa_loads_the_deploy_config_with_decision_logs() -> None:
    opa = services()["opa"]
    command = opa["command"]
    assert command[:2] == ["run", "--server"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in opa["volumes"]}
    assert (COMPOSE.parent / mounts["/config/config.yaml"]).resolve() == (
        REPO / "deploy" / "opa" / "config.yaml"
    )
    assert "--config-file=/config/config.yaml" in command
    config = yaml.safe_load((REPO / "deploy" / "opa" / "config.yaml").read_text())
    assert config["decision_logs"]["console"] is True


def test_only_the_sidecar_is_published_and_on_loopback() -> None:
    for name, service in services().items():
        ports = service.get("ports", [])
        if name == "sidecar":
            assert ports
            assert all(str(p).startswith("127.0.0.1:") for p in ports)
        else:
            assert not ports, f"{name} must stay on the stack's network"


# --- Dockerfile -------------------------------------------------------------------


def instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def test_dockerfile_is_multi_stage_slim_and_pinned() -> None:
    steps = instructions()
    (base,) = [rest for keyword, rest in steps if keyword == "ARG" and "PYTHON_IMAGE" in rest]
    image = base.partition("=")[2]
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", image), image
    stages = [rest for keyword, rest in steps if keyword == "FROM"]
    assert len(stages) >= 2


def test_dockerfile_installs_the_lock_without_dev_extras() -> None:
    runs = " ".join(rest for keyword, rest in instructions() if keyword == "RUN")
    assert "-c requirements.lock '.[server]'" in runs
    assert "[dev]" not in runs
    assert "-e " not in runs


def test_dockerfile_runs_non_root_whose_serve_without_dev() -> None:
    steps = instructions()
    final = steps[max(i for i, (k, _) in enumerate(steps) if k == "FROM") :]
    (user,) = [rest for keyword, rest in final if keyword == "USER"]
    assert user.split(":")[0] not in {"root", "0"}
    (entrypoint,) = [rest for keyword, rest in final if keyword == "ENTRYPOINT"]
    assert yaml.safe_load(entrypoint) == ["whose", "serve"]
    assert "--dev" not in DOCKERFILE.read_text().replace("never runs with --dev", "")


def test_dockerignore_admits_what_the_build_copies() -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore
    copied = set()
    for keyword, rest in instructions():
        if keyword == "COPY" and "--from" not in rest:
            copied |= set(shlex.split(rest)[:-1])
    assert copied == allowed
    for name in copied:
        assert (REPO / name).exists(), name


def healthcheck_command() -> list[str]:
    (check,) = [rest for keyword, rest in instructions() if keyword == "HEALTHCHECK"]
    command = check.partition(" CMD ")[2]
    parsed: list[str] = yaml.safe_load(command)
    return parsed


def test_image_healthcheck_probes_healthz(sidecar: str) -> None:
    command = healthcheck_command()
    assert command[0] == "python"
    # The operations listener's port (the image sets WHOSE_OPS_PORT=9180).
    assert "http://127.0.0.1:9180/healthz" in command[-1]
    # The same command, pointed at a real sidecar, passes; at a closed port, fails.
    live = [
        sys.executable,
        *(a.replace("http://127.0.0.1:9180", ops(sidecar)) for a in command[1:]),
    ]
    assert subprocess.run(live, capture_output=True, timeout=30).returncode == 0
    closed = f"http://127.0.0.1:{free_port()}"
    dead = [sys.executable, *(a.replace("http://127.0.0.1:9180", closed) for a in command[1:])]
    assert subprocess.run(dead, capture_output=True, timeout=30).returncode != 0


def test_compose_mounts_what_make_compose_prep_writes() -> None:
    # `make compose-prep` (Makefile) writes the dev key pair and the bundle under build/;
    # the stack must mount exactly those paths, and OPA must ask for that file name.
    makefile = (REPO / "Makefile").read_text()
    assert "build/keys/bundle-verify.pem" in makefile
    assert "build/bundle/whose.tar.gz" in makefile
    stack = services()
    opa_mounts = {m.split(":")[1]: m.split(":")[0] for m in stack["opa"]["volumes"]}
    assert opa_mounts["/keys/bundle-verify.pem"] == "../build/keys/bundle-verify.pem"
    (bundle_mount,) = stack["bundles"]["volumes"]
    source, target = bundle_mount.split(":")[:2]
    assert source == "../build/bundle"
    config = yaml.safe_load((REPO / "deploy" / "opa" / "config.yaml").read_text())
    assert config["bundles"]["whose"]["resource"] == "whose.tar.gz"
    assert target == "/usr/share/nginx/html"  # nginx serves it as /whose.tar.gz
    assert "http://127.0.0.1:8080/whose.tar.gz" in stack["bundles"]["healthcheck"]["test"]
    assert stack["opa"]["environment"]["WHOSE_BUNDLE_SERVER"] == "http://bundles:8080"
