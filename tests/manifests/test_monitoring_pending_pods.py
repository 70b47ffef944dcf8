"""A runtime pod that is still starting is not an exporter that is down.

Prometheus's pod discovery makes a target of every declared container port of a pod that has an IP, whatever its
phase (discovery/kubernetes/pod.go, `buildPod`). A new runtime pod gets its IP with its sandbox, then the kubelet
pulls and starts its containers one after the other: the exporter sidecar, appended last, starts only once the
model server's image is pulled (`nvcr.io/nvidia/tritonserver:23.04-py3`, gigabytes: minutes on a node new to
it, which is where a scale-up lands when the cluster autoscaler adds a GPU node). All that time the pod is
`Pending` and the exporter's port answers nothing, so `up` is 0; the shipped scrape config kept such targets and
`ModelMeshExporterDown` fired after 5 minutes on every such scale-up, saying "the adapter counts the pod as
missing", which it does not (a pod that is not Ready is left out, docs/design.md).

Here the shipped relabelling (scrape-config.yaml, and the PodMonitor's relabelings on top of what the operator
does) is applied to the discovery labels of such a pod, and what it keeps is scraped as Prometheus would: a
`promtool test rules` unit test over the shipped rules.yaml for a 12-minute pull, then the pod running.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.manifests.series import pod_discovery_labels, relabel
from tests.manifests.support import (
    EXAMPLES,
    PROMETHEUS,
    container,
    find,
    kustomize,
    plain_exporter_endpoint,
    promtool_test_rules,
)
from tests.manifests.test_monitoring import EXPORTER_JOB, RUNTIME_NAMESPACE, RUNTIME_POD_LABELS, scrape_jobs

POD = "modelmesh-serving-triton-5d9c7b-x1"
PULL_MINUTES = 12
MINUTES = 30


def runtime_pod(phase: str, ready: str) -> dict[str, str]:
    """Discovery labels of the sidecar's port on the example runtime's pod, in `phase`."""
    runtime = find(kustomize(EXAMPLES), "ServingRuntime")
    (port,) = container(runtime["spec"], "autoscaler-exporter")["ports"]
    labels = pod_discovery_labels(RUNTIME_NAMESPACE, POD, RUNTIME_POD_LABELS, port["name"], port["containerPort"],
                                  "10.0.3.7")
    return {**labels, "__meta_kubernetes_pod_phase": phase, "__meta_kubernetes_pod_ready": ready}


def pod_monitor_job() -> dict[str, Any]:
    """The exporter PodMonitor as prometheus-operator makes it a scrape job: its own rules first (the selector's and
    the port's keep rules left out, this pod passes them; finished pods dropped; `namespace`, `pod` set), then the
    PodMonitor's relabelings."""
    monitor = find(kustomize(PROMETHEUS), "PodMonitor", "modelmesh-exporter")
    endpoint = plain_exporter_endpoint(monitor)
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    rules = [{keys.get(key, key): (value.lower() if key == "action" else value) for key, value in rule.items()}
             for rule in endpoint["relabelings"]]
    operator = [
        {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)", "action": "drop"},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
    ]
    return {"job_name": "modelmesh-exporter", "relabel_configs": [*operator, *rules]}


def down_alerts_while_pulling(tmp_path: Path, job: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Prometheus's view of the pod through `job`: a target (`up` 0) while the images are pulled, if the job keeps
    it, then the running pod's exporter answering; promtool is asked for ModelMeshExporterDown throughout."""
    starting = relabel(job, runtime_pod("Pending", "false"))
    running = relabel(job, runtime_pod("Running", "true"))
    assert running is not None, "a running runtime pod's exporter is scraped"
    pulling = f"_x{PULL_MINUTES}" if starting is None else f"0x{PULL_MINUTES - 1}"  # one target, the pod's
    assert starting in (None, running), (starting, running)
    series = [{"series": "up{" + ", ".join(f'{k}="{v}"' for k, v in running.items()) + "}",
               "values": f"{pulling} 1x{MINUTES - PULL_MINUTES}"}]
    quiet = [{"eval_time": f"{minute}m", "alertname": "ModelMeshExporterDown", "exp_alerts": []}
             for minute in (6, 9, 11, 20)]
    return promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": series, "alert_rule_test": quiet}],
                               "pending_test.yaml")


def test_a_runtime_pod_pulling_its_images_fires_no_exporter_down(tmp_path: Path) -> None:
    done = down_alerts_while_pulling(tmp_path, scrape_jobs()[EXPORTER_JOB])
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_nor_through_the_pod_monitor(tmp_path: Path) -> None:
    done = down_alerts_while_pulling(tmp_path, pod_monitor_job())
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_a_running_pod_whose_exporter_does_not_answer_is_still_scraped() -> None:
    """The alert's own case stays: a sidecar that crashes or listens elsewhere in a Running pod (Ready or not)."""
    for job in (scrape_jobs()[EXPORTER_JOB], pod_monitor_job()):
        assert relabel(job, runtime_pod("Running", "false")) is not None
