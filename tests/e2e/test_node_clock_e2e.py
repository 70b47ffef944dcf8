"""A runtime pod on a node whose clock is off, through the real processes: fake ModelMesh → real exporters,
one of them under libfaketime two minutes behind (`tests.fakes.node_clock`) → the real adapter → kubectl.

Before the exporter published its clock (`modelmesh_exporter_time_seconds`), that pod's samples looked two
minutes old to the adapter: stale for good (`max_staleness_s` 45 s), so the runtime's values were held and
could never fall, and the request load stayed 503 after a restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from tests.e2e.conftest import data_path_running
from tests.e2e.test_missing_signal_e2e import debug_runtime
from tests.support.processes import poll

pytestmark = pytest.mark.slow


def test_a_pod_on_a_node_two_minutes_behind_is_fresh_and_its_runtimes_values_may_fall(tmp_path: Path) -> None:
    with data_path_running(tmp_path, pods=2, rps=50, clocks_off_s=[0, -120]) as path:
        def complete() -> dict[str, object] | None:
            found = debug_runtime(path)
            return found if found.get("complete") else None

        document = poll(complete, timeout=40)
        pods = {pod["name"]: pod for pod in cast(list[dict[str, Any]], document["pods"])}
        assert pods["pod-1"]["fresh"] and pods["pod-1"]["age_s"] < 10, pods["pod-1"]
        # Both pods at 50 requests a second, every pod fresh: n_r * M_p(r) = 2 * 50.
        load = poll(lambda: path.value("modelmesh_request_load"), timeout=10)
        assert 85.0 <= load <= 115.0
    log = (tmp_path / "adapter.log").read_text()
    assert "default/modelmesh-serving-demo/pod-1: the exporter's clock is 12" in log, log
    assert "s behind the adapter's" in log
    assert "pod-0: the exporter's clock" not in log
