"""Test controls for the custom resources around a ModelMesh runtime: KServe's `ServingRuntime` and
`ClusterServingRuntime` (as modelmesh-serving installs them) and the adapter's own `RuntimeScale`.

They go through the store like any write, so watching clients see the events a cluster would send. The fake
does not run the modelmesh-serving controller: a test that needs one (ServingRuntime.spec.replicas applied to
the Deployment) runs `tests/support/modelmesh_serving.py`'s stand-in against the API.
"""

from __future__ import annotations

from collections.abc import Mapping

from tests.fakes.kube.resources import CLUSTER_SERVING_RUNTIMES, RUNTIME_SCALES, SERVING_RUNTIMES
from tests.fakes.kube.store import ObjectStore
from tests.fakes.kube.wire import JSON


def _runtime_spec(replicas: int | None) -> JSON:
    spec: JSON = {
        "multiModel": True,
        "supportedModelFormats": [{"name": "onnx", "version": "1", "autoSelect": True}],
        "containers": [{"name": "triton", "image": "nvcr.io/nvidia/tritonserver:23.04-py3"}],
        "grpcEndpoint": "port:8085",
        "grpcDataEndpoint": "port:8001",
        "builtInAdapter": {"serverType": "triton", "runtimeManagementPort": 8001},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


class KServeControls(ObjectStore):
    """Synchronous test controls for ServingRuntimes and RuntimeScales; call them from the server's loop."""

    def add_serving_runtime(
        self, namespace: str, name: str, replicas: int | None = None, annotations: Mapping[str, str] | None = None
    ) -> JSON:
        """A multi-model (ModelMesh) ServingRuntime like modelmesh-serving's built-in `triton-2.x`."""
        metadata: JSON = {"name": name, "namespace": namespace, "annotations": dict(annotations or {})}
        return self._create(SERVING_RUNTIMES, {"metadata": metadata, "spec": _runtime_spec(replicas)})

    def add_cluster_serving_runtime(self, name: str, replicas: int | None = None) -> JSON:
        return self._create(CLUSTER_SERVING_RUNTIMES, {"metadata": {"name": name}, "spec": _runtime_spec(replicas)})

    def add_runtime_scale(
        self, namespace: str, name: str, serving_runtime: str | None = None, replicas: int | None = None
    ) -> JSON:
        """A RuntimeScale for `serving_runtime` (default: `name`); no `spec.replicas` unless given."""
        spec: JSON = {"servingRuntime": serving_runtime or name}
        if replicas is not None:
            spec["replicas"] = replicas
        return self._create(RUNTIME_SCALES, {"metadata": {"name": name, "namespace": namespace}, "spec": spec})

    def serving_runtime_replicas(self, namespace: str, name: str) -> int | None:
        obj = self._objects[SERVING_RUNTIMES].get((namespace, name))
        return None if obj is None else (obj.get("spec") or {}).get("replicas")
