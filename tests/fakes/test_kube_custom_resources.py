"""The fake's ServingRuntimes and RuntimeScales against real clients: `kubectl scale`/`get` and the
`kubernetes` client's custom-object and scale calls, as the HPA controller and the adapter use them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.fakes.kube import FakeKubeApi

NS = "modelmesh-serving"
GROUP, VERSION, PLURAL = "autoscaler.modelmesh.io", "v1alpha1", "runtimescales"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


@pytest.fixture
def custom(kube: FakeKubeApi) -> Iterator[client.CustomObjectsApi]:
    configuration = client.Configuration()
    configuration.host = kube.url
    configuration.retries = 0
    with client.ApiClient(configuration) as api:
        yield client.CustomObjectsApi(api)


async def kubectl(kube: FakeKubeApi, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS)
    process = await asyncio.create_subprocess_exec(
        "/usr/bin/kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    return process.returncode or 0, stdout.decode(), stderr.decode()


async def test_kubectl_scale_writes_the_runtime_scale_through_the_scale_subresource(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=2)

    code, _, stderr = await kubectl(kube, tmp_path, "scale", "-n", NS, "runtimescale/triton", "--replicas=5")

    assert code == 0, stderr
    assert kube.stored("runtimescales", NS, "triton")["spec"]["replicas"] == 5
    assert any(r.path.endswith("/runtimescales/triton/scale") for r in kube.requests)


async def test_kubectl_gets_runtime_scales_by_short_name(kube: FakeKubeApi, tmp_path: Path) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=2)

    code, stdout, stderr = await kubectl(kube, tmp_path, "get", "rts", "-n", NS, "-o", "json")

    assert code == 0, stderr
    [item] = json.loads(stdout)["items"]
    assert item["spec"] == {"servingRuntime": "triton", "replicas": 2}


async def test_scale_subresource_is_an_autoscaling_v1_scale(kube: FakeKubeApi, custom: client.CustomObjectsApi) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=3)
    kube.update_object("runtimescales", NS, "triton", lambda o: o.update(
        status={"replicas": 2, "selector": "modelmesh-service=modelmesh-serving,name=modelmesh-serving-triton"}))

    scale: Any = await asyncio.to_thread(custom.get_namespaced_custom_object_scale, GROUP, VERSION, NS, PLURAL,
                                         "triton")

    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"] == {"replicas": 2,
                               "selector": "modelmesh-service=modelmesh-serving,name=modelmesh-serving-triton"}
    assert scale["metadata"]["resourceVersion"] == kube.stored("runtimescales", NS, "triton")["metadata"][
        "resourceVersion"]


async def test_scale_put_is_conditional_on_the_resource_version(
    kube: FakeKubeApi, custom: client.CustomObjectsApi
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=3)
    scale: Any = await asyncio.to_thread(custom.get_namespaced_custom_object_scale, GROUP, VERSION, NS, PLURAL,
                                         "triton")
    scale["spec"]["replicas"] = 4

    await asyncio.to_thread(custom.replace_namespaced_custom_object_scale, GROUP, VERSION, NS, PLURAL, "triton",
                            scale)
    scale["spec"]["replicas"] = 6  # the same, now stale, resourceVersion
    with pytest.raises(ApiException) as stale:
        await asyncio.to_thread(custom.replace_namespaced_custom_object_scale, GROUP, VERSION, NS, PLURAL,
                                "triton", scale)

    assert stale.value.status == 409
    assert kube.stored("runtimescales", NS, "triton")["spec"]["replicas"] == 4


async def test_scale_of_an_object_without_replicas_is_an_internal_error(
    kube: FakeKubeApi, custom: client.CustomObjectsApi
) -> None:
    kube.add_runtime_scale(NS, "triton")

    with pytest.raises(ApiException) as error:
        await asyncio.to_thread(custom.get_namespaced_custom_object_scale, GROUP, VERSION, NS, PLURAL, "triton")

    assert error.value.status == 500
    assert 'the spec replicas field ".spec.replicas" does not exist' in json.loads(error.value.body or "{}")["message"]


async def test_kubectl_scale_sets_the_replicas_of_an_object_that_has_none(kube: FakeKubeApi, tmp_path: Path) -> None:
    """Only reading such a scale fails: a write that sets replicas is taken, as the API server does."""
    kube.add_runtime_scale(NS, "triton")

    code, _, stderr = await kubectl(kube, tmp_path, "scale", "-n", NS, "runtimescale/triton", "--replicas=3")

    assert code == 0, stderr
    assert kube.stored("runtimescales", NS, "triton")["spec"]["replicas"] == 3


async def test_a_scale_patch_that_leaves_no_replicas_is_a_bad_request(
    kube: FakeKubeApi, custom: client.CustomObjectsApi
) -> None:
    kube.add_runtime_scale(NS, "triton")

    with pytest.raises(ApiException) as error:
        await asyncio.to_thread(custom.patch_namespaced_custom_object_scale, GROUP, VERSION, NS, PLURAL, "triton",
                                {"metadata": {"labels": {"team": "a"}}})

    assert error.value.status == 400
    assert 'the spec replicas field ".spec.replicas" cannot be empty' in json.loads(error.value.body or "{}")["message"]
    assert "replicas" not in kube.stored("runtimescales", NS, "triton")["spec"]


async def test_negative_scale_is_invalid(kube: FakeKubeApi, custom: client.CustomObjectsApi) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=1)

    with pytest.raises(ApiException) as error:
        await asyncio.to_thread(custom.patch_namespaced_custom_object_scale, GROUP, VERSION, NS, PLURAL, "triton",
                                {"spec": {"replicas": -1}})

    assert error.value.status == 422


async def test_status_writes_change_only_status(kube: FakeKubeApi, custom: client.CustomObjectsApi) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=1)

    await asyncio.to_thread(custom.patch_namespaced_custom_object_status, GROUP, VERSION, NS, PLURAL, "triton",
                            {"spec": {"replicas": 9}, "status": {"replicas": 1, "selector": "a=b"}})
    await asyncio.to_thread(custom.patch_namespaced_custom_object, GROUP, VERSION, NS, PLURAL, "triton",
                            {"status": {"replicas": 7}})

    stored = kube.stored("runtimescales", NS, "triton")
    assert stored["spec"]["replicas"] == 1  # the status write ignored spec
    assert stored["status"] == {"replicas": 1, "selector": "a=b"}  # the main-resource write ignored status
    assert stored["metadata"]["generation"] == 1


async def test_serving_runtime_merge_patch_bumps_generation_and_is_watched(
    kube: FakeKubeApi, custom: client.CustomObjectsApi
) -> None:
    kube.add_serving_runtime(NS, "triton")
    listed: Any = await asyncio.to_thread(custom.list_namespaced_custom_object, "serving.kserve.io", "v1alpha1", NS,
                                          "servingruntimes")
    version = listed["metadata"]["resourceVersion"]

    await asyncio.to_thread(custom.patch_namespaced_custom_object, "serving.kserve.io", "v1alpha1", NS,
                            "servingruntimes", "triton", {"spec": {"replicas": 3}})
    stream: Any = await asyncio.to_thread(
        custom.list_namespaced_custom_object, "serving.kserve.io", "v1alpha1", NS, "servingruntimes",
        watch=True, resource_version=version, timeout_seconds=1, _preload_content=False)
    body = await asyncio.to_thread(stream.read)
    events = [json.loads(line) for line in body.splitlines() if line.strip()]

    assert kube.serving_runtime_replicas(NS, "triton") == 3
    assert kube.stored("servingruntimes", NS, "triton")["metadata"]["generation"] == 2
    assert [(e["type"], e["object"]["spec"]["replicas"]) for e in events] == [("MODIFIED", 3)]


async def test_servingruntimes_have_no_subresources(kube: FakeKubeApi, custom: client.CustomObjectsApi) -> None:
    kube.add_serving_runtime(NS, "triton")

    with pytest.raises(ApiException) as error:
        await asyncio.to_thread(custom.get_namespaced_custom_object_status, "serving.kserve.io", "v1alpha1", NS,
                                "servingruntimes", "triton")

    assert error.value.status == 404
