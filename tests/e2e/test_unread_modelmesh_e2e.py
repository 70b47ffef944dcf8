"""Exporters that answer but cannot read ModelMesh (a wrong --modelmesh-url), seen as a platform engineer sees
them: `kubectl get --raw` of a metric, KEDA's endpoint, and the adapter's log. Fake ModelMesh → real exporters
(fake NVML, so each pod has a fresh GPU reading) → the adapter, scraping.

Was: every answer said "is unknown right now: warming up ... (pod-0: no data; pod-1: no data)", then "only 0 of 2
ready pods fresh", for as long as the setting stayed wrong: nothing named the exporter's setting. Then every
source's checks, a Prometheus PodMonitor's beside the exporter's: the adapter knows it scrapes, and what fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import DEPLOYMENT, data_path_running
from tests.e2e.test_missing_signal_e2e import fake_gpus
from tests.support.processes import free_port, http_get, poll

pytestmark = pytest.mark.slow


def test_exporters_with_a_wrong_modelmesh_url_are_named_in_every_answer(tmp_path: Path) -> None:
    nowhere = [["--modelmesh-url", f"https://127.0.0.1:{free_port()}/metrics"] for _ in range(2)]
    with data_path_running(tmp_path, pods=2, gpus=fake_gpus(tmp_path, [50, 50]), exporter_args=nowhere) as path:
        code, message = poll(lambda: (found if "reads nothing" in str((found := path.served(
            "modelmesh_request_load"))[1]) else None), timeout=30)
        text = str(message)
        assert code != 0 and "unknown right now" not in text, text
        assert f"modelmesh_request_load for runtime default/{DEPLOYMENT} is not served: the scrape source reads " \
            "nothing of its ready pods: garbage (2 pods); pod-" in text, text
        assert "its exporter cannot read ModelMesh" in text and "--modelmesh-url" in text, text
        assert "Prometheus" not in text, text  # the adapter scrapes: nothing of a PodMonitor applies

        status, body = http_get(f"{path.adapter_url}/keda/v1/namespaces/default/runtimes/{DEPLOYMENT}")
        assert status == 503 and "are not served: the scrape source reads nothing" in body, body
        assert "no data" not in path.adapter_log(), path.adapter_log()[-2000:]
