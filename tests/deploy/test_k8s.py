"""deploy/k8s: every manifest validates against the Kubernetes JSON schemas, offline.

The schemas come from the pinned `kubernetes-validate` package (strict: unknown fields
are errors). Beyond the schemas, the checks a schema cannot make: OPA on loopback only,
probes on the right paths, non-root read-only containers, real settings in the env.
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils as k8s_schemas

from sidecar.settings import Settings

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
# The Kubernetes minor version the manifests target (docs/operations.md says so too).
K8S_VERSION = "1.34.0"

Manifest = dict[str, Any]


def manifests() -> list[tuple[str, Manifest]]:
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if document is not None:
                found.append((path.name, document))
    return found


def by_kind(kind: str) -> Manifest:
    matches = [m for _, m in manifests() if m["kind"] == kind]
    assert len(matches) == 1, f"expected one {kind}, found {len(matches)}"
    return matches[0]


def validate(manifest: Manifest) -> None:
    # Raises ValidationError (schema) or SchemaNotFoundError (unknown kind / apiVersion).
    k8s_schemas.validate(manifest, K8S_VERSION, strict=True)


def test_the_schema_package_covers_the_target_version() -> None:
    # If the pinned package drops this version the test must not quietly use another.
    assert any(v.startswith("1.34.") for v in k8s_schemas.all_versions())


@pytest.mark.parametrize(
    ("filename", "manifest"), manifests(), ids=[f"{f}:{m['kind']}" for f, m in manifests()]
)
def test_manifest_matches_kubernetes_schema(filename: str, manifest: Manifest) -> None:
    validate(manifest)


def test_every_required_kind_is_there() -> None:
    kinds = {m["kind"] for _, m in manifests()}
    wanted = {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ConfigMap",
    }
    assert wanted <= kinds
    assert by_kind("HorizontalPodAutoscaler")["apiVersion"] == "autoscaling/v2"


KUSTOMIZE = REPO / "bin" / "kustomize"


def rendered() -> list[Manifest]:
    """What `kubectl apply -k deploy/k8s` applies, rendered by the pinned kustomize."""
    if not KUSTOMIZE.exists():
        pytest.fail(f"{KUSTOMIZE} is missing: run the tests with `make test`")
    output = subprocess.run(
        [str(KUSTOMIZE), "build", str(K8S)], capture_output=True, text=True, check=True
    ).stdout
    return [m for m in yaml.safe_load_all(output) if m is not None]


def test_rendered_kustomization_matches_kubernetes_schema() -> None:
    resources = rendered()
    assert len(resources) == len(manifests())
    for resource in resources:
        validate(resource)
        assert resource["metadata"]["labels"]["app.kubernetes.io/part-of"] == "whose"
        if resource["kind"] != "Namespace":
            assert resource["metadata"]["namespace"] == "whose", resource["kind"]
    (deployment,) = [r for r in resources if r["kind"] == "Deployment"]
    images = {c["name"]: c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert images["sidecar"] == "registry.example.com/whose/sidecar:0.1.0"


def test_kustomization_lists_exactly_the_validated_files() -> None:
    # What `kubectl apply -k` deploys is what this module validated, nothing more or less.
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)


# --- the validator really rejects broken manifests -------------------------------


def _broken_deployments() -> list[tuple[str, Manifest]]:
    base = by_kind("Deployment")
    cases = []
    typo = copy.deepcopy(base)
    probe = typo["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    probe["httpGett"] = probe.pop("httpGet")
    cases.append(("unknown field", typo))
    wrong_type = copy.deepcopy(base)
    wrong_type["spec"]["replicas"] = "three"
    cases.append(("wrong type", wrong_type))
    missing = copy.deepcopy(base)
    del missing["spec"]["selector"]
    cases.append(("missing required field", missing))
    bad_port = copy.deepcopy(base)
    bad_port["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "http"
    cases.append(("port name where a number belongs", bad_port))
    return cases


@pytest.mark.parametrize(("why", "manifest"), _broken_deployments(), ids=lambda v: str(v)[:30])
def test_broken_manifest_is_rejected(why: str, manifest: Manifest) -> None:
    with pytest.raises(k8s_schemas.ValidationError):
        validate(manifest)


def test_unknown_kind_is_an_error_not_a_skip() -> None:
    with pytest.raises(k8s_schemas.SchemaNotFoundError):
        validate({"apiVersion": "apps/v1", "kind": "Deploymnet", "metadata": {"name": "x"}})


# --- what the schema cannot say ----------------------------------------------------


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = by_kind("Deployment")["spec"]["template"]["spec"]
    return spec


def container(name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in pod_spec()["containers"] if c["name"] == name]
    assert len(found) == 1, name
    return found[0]


def env_of(name: str) -> dict[str, Any]:
    return {e["name"]: e for e in container(name).get("env", [])}


def test_opa_policy_api_listens_on_loopback_only() -> None:
    args = container("opa")["args"]
    assert "--addr=127.0.0.1:8181" in args
    assert not [a for a in args if a.startswith("--addr=") and a != "--addr=127.0.0.1:8181"]
    # The only other listener is the read-only diagnostic one (health, metrics).
    assert [a for a in args if a.startswith("--diagnostic-addr=")] == [
        "--diagnostic-addr=0.0.0.0:8282"
    ]
    assert env_of("sidecar")["WHOSE_OPA_URL"]["value"] == "http://127.0.0.1:8181"


def test_opa_image_and_bundle_wiring() -> None:
    opa = container("opa")
    assert opa["image"] == "openpolicyagent/opa:1.22.3"
    assert "--set-file=keys.whose-bundle.key=/etc/whose/trust/bundle-verify.pem" in opa["args"]
    assert opa["readinessProbe"]["httpGet"]["path"] == "/health?bundles"
    config = yaml.safe_load(by_kind("ConfigMap")["data"]["config.yaml"])
    assert config["bundles"]["whose"]["signing"]["keyid"] == "whose-bundle"
    assert "whose-bundle" in config["keys"]
    assert config["decision_logs"]["console"] is True


def test_probes_and_resources() -> None:
    sidecar = container("sidecar")
    assert sidecar["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert sidecar["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for c in pod_spec()["containers"]:
        assert {"cpu", "memory"} <= set(c["resources"]["requests"]), c["name"]
        assert {"cpu", "memory"} <= set(c["resources"]["limits"]), c["name"]


def test_containers_run_non_root_on_read_only_root_fs() -> None:
    assert pod_spec()["securityContext"]["runAsNonRoot"] is True
    for c in pod_spec()["containers"]:
        context = c["securityContext"]
        assert context["readOnlyRootFilesystem"] is True, c["name"]
        assert context["allowPrivilegeEscalation"] is False, c["name"]
        assert context["capabilities"]["drop"] == ["ALL"], c["name"]


def test_images_are_pinned() -> None:
    for c in pod_spec()["containers"]:
        image = c["image"]
        assert ":" in image, image
        assert not image.endswith(":latest"), image


def test_sidecar_env_names_real_settings_and_production_mode() -> None:
    fields = {f"WHOSE_{name.upper()}" for name in Settings.model_fields}
    env = env_of("sidecar")
    assert set(env) <= fields, f"not settings: {sorted(set(env) - fields)}"
    assert env["WHOSE_STORE"]["value"] == "server"
    assert env["WHOSE_HOST"]["value"] == "0.0.0.0"
    assert "WHOSE_DEV" not in env
    # Secrets come from a Secret, never inline.
    for name in ("WHOSE_QDRANT_API_KEY", "WHOSE_REDIS_URL", "WHOSE_QDRANT_URL"):
        assert "secretKeyRef" in env[name]["valueFrom"], name
    assert {"WHOSE_JWT_JWKS_FILE", "WHOSE_JWT_ISSUER", "WHOSE_JWT_AUDIENCE"} <= set(env)


def test_sidecar_env_values_are_accepted_by_settings() -> None:
    values = {
        name.removeprefix("WHOSE_").lower(): e["value"]
        for name, e in env_of("sidecar").items()
        if "value" in e
    }
    settings = Settings.model_validate({**values, "qdrant_url": "https://qdrant.example:6333"})
    assert settings.store == "server"
    assert settings.opa_url == "http://127.0.0.1:8181"


def test_service_pdb_and_hpa_select_the_deployment() -> None:
    labels = by_kind("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert by_kind("Service")["spec"]["selector"].items() <= labels.items()
    assert by_kind("PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= (
        labels.items()
    )
    assert by_kind("NetworkPolicy")["spec"]["podSelector"]["matchLabels"].items() <= (
        labels.items()
    )
    target = by_kind("HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == (
        "Deployment",
        by_kind("Deployment")["metadata"]["name"],
    )
