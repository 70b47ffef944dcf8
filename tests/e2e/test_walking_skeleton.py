"""The whole data path, checked the way a new user would: real processes, the real kubectl and promtool."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tests.e2e.conftest import DEPLOYMENT, DataPath
from tests.support.kubectl import get_raw
from tests.support.processes import http_get, poll

pytestmark = pytest.mark.slow


def served_value(data_path: DataPath, metric: str) -> float | None:
    return data_path.value(metric)


def near(actual: float | None, expected: float, tolerance: float = 0.2) -> bool:
    return actual is not None and abs(actual - expected) <= tolerance * expected


def test_served_request_load_follows_the_modelmesh_request_rate(data_path: DataPath) -> None:
    poll(lambda: near(served_value(data_path, "modelmesh_request_load"), 50.0), timeout=30)

    data_path.set_load(requests_per_second=200)
    poll(lambda: near(served_value(data_path, "modelmesh_request_load"), 200.0), timeout=30)

    data_path.set_load(requests_per_second=20)
    poll(lambda: near(served_value(data_path, "modelmesh_request_load"), 20.0), timeout=30)


def test_served_item_has_the_external_metrics_shape(data_path: DataPath) -> None:
    poll(lambda: served_value(data_path, "modelmesh_request_load") is not None, timeout=30)
    code, body = get_raw(data_path.kubeconfig, data_path.metric_path("modelmesh_request_load"))
    assert code == 0
    assert body["kind"] == "ExternalMetricValueList"
    assert body["apiVersion"] == "external.metrics.k8s.io/v1beta1"
    [item] = body["items"]
    assert item["metricName"] == "modelmesh_request_load"
    assert item["metricLabels"] == {"deployment": DEPLOYMENT, "servingruntime": "demo"}
    assert item["value"].endswith("m")
    assert item["window"] == 3
    assert item["timestamp"].endswith("Z")


def test_metric_names_match_case_insensitively(data_path: DataPath) -> None:
    poll(lambda: served_value(data_path, "MODELMESH_REQUEST_LOAD") is not None, timeout=30)


def test_servingruntime_selector_names_the_same_runtime(data_path: DataPath) -> None:
    path = data_path.metric_path("modelmesh_request_load", selector="servingruntime%3Ddemo")

    def served() -> tuple[int, Any] | None:
        answer = get_raw(data_path.kubeconfig, path)
        return answer if answer[0] == 0 else None

    _, body = poll(served, timeout=30)
    assert body["items"][0]["metricLabels"]["servingruntime"] == "demo"


def test_discovery_lists_every_served_metric(data_path: DataPath) -> None:
    code, body = get_raw(data_path.kubeconfig, "/apis/external.metrics.k8s.io/v1beta1")
    assert code == 0
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == "external.metrics.k8s.io/v1beta1"
    resources: list[dict[str, Any]] = body["resources"]
    assert {r["name"] for r in resources} == {
        "modelmesh_desired_replicas", "modelmesh_gpu_busy", "modelmesh_request_load", "modelmesh_cache_pressure",
    }
    for resource in resources:
        assert resource["namespaced"] is True
        assert resource["kind"] == "ExternalMetricValueList"
        assert resource["verbs"] == ["get"]


@pytest.mark.parametrize(
    ("path", "code", "reason"),
    [
        ("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/no_such_metric?labelSelector=deployment%3Dx",
         404, "NotFound"),
        ("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/modelmesh_request_load", 400, "BadRequest"),
        ("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/modelmesh_request_load?labelSelector=app%3Dx",
         400, "BadRequest"),
        ("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/modelmesh_request_load"
         "?labelSelector=deployment%3Dnot-a-runtime", 404, "NotFound"),
        ("/apis/external.metrics.k8s.io/v1beta1/namespaces/other/modelmesh_request_load"
         f"?labelSelector=deployment%3D{DEPLOYMENT}", 404, "NotFound"),
    ],
    ids=["unknown metric", "missing selector", "selector without runtime", "unknown runtime", "other namespace"],
)
def test_bad_requests_get_a_kubernetes_status(data_path: DataPath, path: str, code: int, reason: str) -> None:
    poll(lambda: http_get(data_path.adapter_url + "/readyz")[0] == 200, timeout=30)
    status, body = http_get(data_path.adapter_url + path)
    import json

    document = json.loads(body)
    assert status == code
    assert document["kind"] == "Status"
    assert document["apiVersion"] == "v1"
    assert document["status"] == "Failure"
    assert document["code"] == code
    assert document["reason"] == reason
    assert document["message"]


def test_promtool_finds_nothing_in_the_exporter_output(data_path: DataPath) -> None:
    poll(lambda: "modelmesh_pod_requests_per_second" in http_get(data_path.exporter_url)[1], timeout=30)
    status, text = http_get(data_path.exporter_url)
    assert status == 200
    result = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")  # the adapter is self-signed
def test_the_kubernetes_python_client_reads_discovery_and_version(data_path: DataPath) -> None:
    """The official client asks for `/apis/`, `/version/` and the group version with a trailing slash, as
    kube-apiserver (go-restful) answers them; so must the adapter."""
    from kubernetes import client, config

    api = config.new_client_from_config(str(data_path.kubeconfig))  # type: ignore[no-untyped-call]
    groups = client.ApisApi(api).get_api_versions()
    assert [group.name for group in groups.groups] == ["external.metrics.k8s.io"]
    assert client.VersionApi(api).get_code().git_version.startswith("v")
    for path in ("/apis/external.metrics.k8s.io/", "/apis/external.metrics.k8s.io/v1beta1/"):
        assert get_raw(data_path.kubeconfig, path)[0] == 0, path
    metric = data_path.metric_path("modelmesh_desired_replicas").replace("?", "/?")
    poll(lambda: get_raw(data_path.kubeconfig, metric)[0] == 0, timeout=30)
