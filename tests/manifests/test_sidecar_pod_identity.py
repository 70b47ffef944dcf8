"""The example runtime's sidecar (manifests/examples, with exporter-sidecar-patch.yaml) names its pod: its
environment, with the downward API filled in as the kubelet fills it, makes the real exporter publish
`modelmesh_exporter_pod_info` with the pod's namespace, name and uid, which the adapter checks every answer against
(`autoscaler.sources.answered_pod`)."""

from __future__ import annotations

from prometheus_client import generate_latest

from exporter import names
from exporter.app import REGISTRY_KEY, build_app
from exporter.settings import parse_settings
from tests.exporter.test_exporter_app import samples
from tests.manifests.support import EXAMPLES, container, find, kustomize
from tests.manifests.test_manifests import DOWNWARD_API


def test_the_shipped_sidecar_publishes_which_pod_it_runs_in() -> None:
    runtime = find(kustomize(EXAMPLES), "ServingRuntime")
    sidecar = container(runtime["spec"], "autoscaler-exporter")
    env = {e["name"]: e["value"] if "value" in e else DOWNWARD_API[e["name"]][1] for e in sidecar["env"]}

    text = generate_latest(build_app(parse_settings([], environ=env))[REGISTRY_KEY]).decode()

    namespace, name, uid = (DOWNWARD_API[f"EXPORTER_POD_{part}"][1] for part in ("NAMESPACE", "NAME", "UID"))
    labels = (("namespace", namespace), ("pod", name), ("uid", uid))
    assert samples(text)[(names.POD_INFO, labels)] == 1.0, text
