"""`--workers 0` (one process) and `--shutdown-delay`: the delay is what keeps an HPA from a refused connection
while the Service's endpoints still route to a terminating pod (test_rollout.py); a replica run in one process
(to debug it in a cluster, say) must honour it too, as the refresh process of `--workers N` does: on SIGTERM
the Lease is released and `/readyz` fails while the port answers, for the delay or until a second signal."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.actuation.test_crash_handover import released_by
from tests.actuation.test_rollout import METRIC, status_of
from tests.actuation.test_two_adapters import exporters, healthy, holder, runtime_files, start_adapter, wait_for
from tests.fakes.kube import FakeKubeApi

__all__ = ["exporters"]  # the fixture, used by name

pytestmark = pytest.mark.slow


async def test_one_process_answers_for_the_shutdown_delay_after_releasing_the_lease(
    kube: FakeKubeApi, exporters: str, tmp_path: Path
) -> None:
    targets, kubeconfig = runtime_files(kube, exporters, tmp_path)
    adapter = await start_adapter(tmp_path, 0, targets, kubeconfig, "--workers", "0", "--shutdown-delay", "20s")
    try:
        await healthy(adapter)
        await wait_for(lambda: adapter.identity is not None and holder(kube) == adapter.identity, 15, "it leads")
        mark = len(kube.requests)
        adapter.process.send_signal(signal.SIGTERM)
        await wait_for(lambda: released_by(kube.requests[mark:], adapter) or adapter.process.returncode is not None,
                       20, "it releases the Lease (or exits)")
        assert released_by(kube.requests[mark:], adapter), "the Lease was released"
        assert await status_of(adapter.url + METRIC) in (200, 503), "a request routed to it is still answered"
        assert await status_of(adapter.url + "/readyz") == 503, "its readiness fails"

        adapter.process.send_signal(signal.SIGTERM)  # a second signal ends the delay
        await wait_for(lambda: adapter.process.returncode is not None, 30, "it stops")
        assert adapter.process.returncode == 0
        log = adapter.log.read_text()
        assert log.index("released by") < log.index("serving 20 s more (--shutdown-delay)")
    finally:
        await adapter.stop(signal.SIGKILL)
