"""/debug shows, for every pod, the URL the adapter scrapes it at, healthy or not: an operator rolling the
exporters' sidecars to TLS (`https-exporter`) sees per pod which scheme `--exporter-scheme auto` chose, where
before a pod's URL showed only in the detail of a failing scrape. The real adapter, real exporters on the pods'
IPs (one TLS, one plain), the fake Kubernetes API, read with kubectl."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cluster_exporter_scheme_per_pod import PODS, debug, half_rolled_runtime, pki  # noqa: F401
from tests.e2e.test_cluster_exporter_tls import Pki
from tests.support.processes import poll

pytestmark = pytest.mark.slow


async def test_debug_shows_each_healthy_pods_scrape_url_with_the_scheme_its_port_name_chose(
        tmp_path: Path, pki: Pki) -> None:  # noqa: F811
    async with half_rolled_runtime(tmp_path, pki) as kubeconfig:  # --exporter-scheme left at auto

        def both_fresh() -> list[dict[str, Any]] | None:
            pods: list[dict[str, Any]] = debug(kubeconfig).get("pods", [])
            return pods if [pod["fresh"] for pod in pods] == [True, True] else None

        pods = await asyncio.to_thread(poll, both_fresh, 60)
    urls = {pod["name"]: pod.get("scrape_url", "(no scrape_url field)") for pod in pods}
    assert urls["triton-tls"].startswith(f"https://{PODS['triton-tls'][0]}:"), urls
    assert urls["triton-plain"].startswith(f"http://{PODS['triton-plain'][0]}:"), urls
    assert all(url.endswith("/metrics") for url in urls.values()), urls
