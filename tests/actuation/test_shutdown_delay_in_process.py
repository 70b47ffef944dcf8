"""`--workers 0` (one process) and `--shutdown-delay`: the delay is what keeps an HPA from a refused connection
while the Service's endpoints still route to a terminating pod (test_rollout.py); a replica run in one process
(to debug it in a cluster, say) must honour it too, as the refresh process of `--workers N` does: on SIGTERM
the Lease is released and `/readyz` fails while the port answers, for the delay or until a second signal."""

from __future__ import annotations

import asyncio
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
        # Said at start, before any SIGTERM: the grace period the pod needs (the Lease's client timeout here is
        # 0.25 s: 0.75 s for the writes in flight and the release; one process has no workers to stop).
        assert ("after SIGTERM this replica serves 20 s more (--shutdown-delay), then takes up to 0.75 s more to "
                "stop: the pod's terminationGracePeriodSeconds must be above 20.75 s") in adapter.log.read_text()
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


@pytest.mark.parametrize("workers", ["0", "2"])
async def test_a_shutdown_delay_longer_than_the_stall_limit_keeps_answering_and_calls_nothing_hung(
    kube: FakeKubeApi, exporters: str, tmp_path: Path, workers: str
) -> None:
    """The refresh stops at SIGTERM on purpose; the serving side must not take the drain for a hung refresh.
    With a refresh interval of 0.5 s the stall limit is its floor, 10 s: a 14 s delay outlasts it. Taken for a
    stall, every value answered 503 (the HPA's FailedGetExternalMetric, what the delay is there to avoid),
    `/livez` failed and each worker logged an ERROR that the refresh was hung."""
    targets, kubeconfig = runtime_files(kube, exporters, tmp_path)
    adapter = await start_adapter(tmp_path, 0, targets, kubeconfig, "--workers", workers, "--shutdown-delay", "14s")
    try:
        await healthy(adapter)
        for _ in range(100):  # the values are known once every pod has been read
            if await status_of(adapter.url + METRIC) == 200:
                break
            await asyncio.sleep(0.1)
        assert await status_of(adapter.url + METRIC) == 200
        # 0.75 s for the writes in flight and the Lease release, and 10 s for the workers' stop where there are any.
        grace_s = {"0": "14.75", "2": "24.75"}[workers]
        assert f"terminationGracePeriodSeconds must be above {grace_s} s" in adapter.log.read_text(), "said at start"
        adapter.process.send_signal(signal.SIGTERM)
        await wait_for(lambda: "serving 14 s more (--shutdown-delay)" in adapter.log.read_text(), 15,
                       "it starts its shutdown delay")
        await asyncio.sleep(11.5)  # past the 10 s stall limit, within the 14 s delay
        assert adapter.process.returncode is None, "still in its shutdown delay"
        assert await status_of(adapter.url + METRIC) == 200, "the last values are still served"
        assert await status_of(adapter.url + "/livez") == 200, "nothing is hung: the kubelet must not restart it"
        assert await status_of(adapter.url + "/readyz") == 503, "its readiness fails, as for the whole delay"
        await wait_for(lambda: adapter.process.returncode is not None, 30, "it stops after the delay")
        assert adapter.process.returncode == 0
        assert "hung" not in adapter.log.read_text()
    finally:
        await adapter.stop(signal.SIGKILL)
