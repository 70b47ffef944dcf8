"""A running data path for end-to-end tests: fake ModelMesh → exporter → adapter, all real processes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.support.kubectl import write_kubeconfig
from tests.support.processes import free_port, http_post_json, running

DEPLOYMENT = "modelmesh-serving-demo"


@dataclass
class DataPath:
    modelmesh_url: str
    exporter_url: str
    adapter_url: str
    kubeconfig: Path
    log_dir: Path

    def set_load(self, **load: float) -> None:
        import json

        http_post_json(self.modelmesh_url.replace("/metrics", "/control"), json.dumps(load))

    def metric_path(self, metric: str, selector: str = f"deployment%3D{DEPLOYMENT}") -> str:
        return f"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/{metric}?labelSelector={selector}"


@pytest.fixture(scope="module")
def data_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataPath]:
    workdir = tmp_path_factory.mktemp("data-path")
    mm_port, exporter_port, adapter_port = free_port(), free_port(), free_port()
    modelmesh_url = f"https://127.0.0.1:{mm_port}/metrics"
    exporter_url = f"http://127.0.0.1:{exporter_port}/metrics"
    targets = workdir / "targets.yaml"
    targets.write_text(yaml.safe_dump({"runtimes": [{
        "namespace": "default", "deployment": DEPLOYMENT, "pods": [{"name": "pod-0", "url": exporter_url}],
    }]}))
    with running(
        ["autoscaler.demo.fake_modelmesh", "--listen", f"127.0.0.1:{mm_port}", "--rps", "50",
         "--cert-dir", str(workdir / "mm-tls")],
        modelmesh_url, workdir / "modelmesh.log",
    ), running(
        ["exporter.cli", "--listen", f"127.0.0.1:{exporter_port}", "--modelmesh-url", modelmesh_url,
         "--modelmesh-ca-file", str(workdir / "mm-tls" / "tls.crt"), "--no-gpu",
         "--modelmesh-interval", "0.5", "--load-window", "3"],
        exporter_url, workdir / "exporter.log",
    ), running(
        ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
         "--targets", str(targets), "--refresh-interval", "1", "--window", "3", "--scale-down-tau", "1"],
        f"https://127.0.0.1:{adapter_port}/healthz", workdir / "adapter.log",
    ):
        yield DataPath(
            modelmesh_url, exporter_url, f"https://127.0.0.1:{adapter_port}",
            write_kubeconfig(workdir / "kubeconfig", f"https://127.0.0.1:{adapter_port}"), workdir,
        )
