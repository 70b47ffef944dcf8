"""`serve` as shipped (refresh process and serving worker), an exporter that refuses and one whose certificate
does not verify, as an operator sees them with `kubectl get --raw`: the 503 points at /debug, and /debug names
each failing pod, the error in the backend's words, and since when.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

RUNTIME = "modelmesh-serving-demo"
DEBUG = f"/debug/runtimes/default/{RUNTIME}"
METRIC = ("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/modelmesh_desired_replicas"
          f"?labelSelector=deployment%3D{RUNTIME}")


async def test_debug_names_the_failing_exporters_through_the_serving_worker(tmp_path: Path) -> None:
    port, dead = free_port(), free_port()
    targets = tmp_path / "targets.yaml"
    targets.write_text(f"""runtimes:
  - namespace: default
    deployment: {RUNTIME}
    pods:
      - {{name: demo-0, url: "http://127.0.0.1:{dead}/metrics"}}
      - {{name: demo-1, url: "https://127.0.0.1:{port}/metrics"}}
""")  # demo-1: the adapter's own self-signed port, a certificate the scrape does not trust
    with running(["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
                  "--targets", str(targets), "--refresh-interval", "1"],
                 f"https://127.0.0.1:{port}/healthz", tmp_path / "adapter.log"):
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}")
        for _ in range(60):
            code, said = await asyncio.to_thread(get_raw, kubeconfig, METRIC)
            if code != 0 and "ServiceUnavailable" in str(said) and "first refresh" not in str(said):
                break
            await asyncio.sleep(0.5)
        assert str(said).strip().endswith(f"why: {DEBUG} on an adapter pod"), said
        code, document = await asyncio.to_thread(get_raw, kubeconfig, DEBUG)
        assert code == 0, document
        problems = {p["pod"]: p for p in document["source"]["problems"]}
        assert document["source"]["name"] == "scrape", json.dumps(document["source"])
        assert problems["demo-0"]["reason"] == "connect" and f"127.0.0.1:{dead}" in problems["demo-0"]["detail"]
        assert problems["demo-1"]["reason"] == "tls" and "--exporter-ca-file" in problems["demo-1"]["detail"]
        assert all(p["since"].endswith("Z") for p in problems.values())
