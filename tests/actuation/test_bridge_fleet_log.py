"""The replica bridge's log at fleet size, as the platform engineer reads it: what a pass carried or adopted is
one line a kind once it is more than a few RuntimeScales, not a line per RuntimeScale.

Two ordinary fleet events wrote a line per RuntimeScale: installing the bridge on a running fleet (the shipped
RuntimeScale has no `spec.replicas`, so the first pass adopts every runtime's: 1,000 lines at 1,000 runtimes),
and a fleet-wide swing in load (the HPAs of 200 runtimes scaling together: 200 lines, and as many again on the
way down). A few RuntimeScales still get their own line each."""

from __future__ import annotations

import asyncio
import logging
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.kube.client import KubeClient
from autoscaler.log_lists import NAMED
from tests.actuation.conftest import connect
from tests.fakes.kube import FakeKubeApi

NS = "ml"
FLEET = 60
LONGEST_LINE = 2_000
"""A log line longer than this is one no person reads (tests/hardening/test_fleet_observability.py)."""


def fleet(kube: FakeKubeApi, runtimes: int, scale_replicas: int | None) -> None:
    """`runtimes` ModelMesh runtimes of 2 replicas, each with a RuntimeScale asking for `scale_replicas` (None:
    created as the shipped example is, without `spec.replicas`)."""
    for i in range(runtimes):
        kube.add_serving_runtime(NS, f"rt{i}", replicas=2)
        kube.add_modelmesh_runtime(NS, f"modelmesh-serving-rt{i}", replicas=2)
        kube.add_runtime_scale(NS, f"rt{i}", replicas=scale_replicas)


def bridge_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "autoscaler.actuation.bridge"]


async def test_installing_the_bridge_on_a_fleet_says_the_adoptions_in_one_line(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture,
) -> None:
    fleet(kube, FLEET, scale_replicas=None)
    bridge = ReplicaBridge(kube_client, namespaces=[NS])
    with caplog.at_level(logging.INFO, logger="autoscaler.actuation.bridge"):
        await bridge.sync()
    lines = bridge_lines(caplog)
    adopted = [line for line in lines if "adopted" in line]
    assert adopted == [adopted[0]], lines
    assert adopted[0].startswith(f"{FLEET} RuntimeScales: spec.replicas adopted from their runtimes: ml/rt0 (2), ")
    assert adopted[0].endswith(f" and {FLEET - NAMED} more")
    assert max(map(len, lines)) < LONGEST_LINE


async def test_a_fleet_scaled_together_says_the_carried_replicas_in_one_line(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture,
) -> None:
    fleet(kube, FLEET, scale_replicas=2)
    bridge = ReplicaBridge(kube_client, namespaces=[NS])
    await bridge.sync()
    for i in range(FLEET):  # the HPAs' writes, all in one swing of load
        kube.update_object("runtimescales", NS, f"rt{i}", lambda o: o["spec"].update(replicas=3))
    with caplog.at_level(logging.INFO, logger="autoscaler.actuation.bridge"):
        await bridge.sync()
    assert all(kube.serving_runtime_replicas(NS, f"rt{i}") == 3 for i in range(FLEET))
    lines = bridge_lines(caplog)
    carried = [line for line in lines if "->" in line]
    assert carried == [carried[0]], lines
    assert carried[0].startswith(f"{FLEET} RuntimeScales: replicas carried to their ServingRuntimes' spec.replicas: "
                                 "ml/rt0 (2 -> 3), ")
    assert max(map(len, lines)) < LONGEST_LINE


async def test_servingruntime_manifests_applied_again_fleet_wide_are_one_warning_per_pass(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture,
) -> None:
    """A GitOps tool applies every ServingRuntime's manifest again (`replicas: 5`): each is set back, and said
    once per episode; the operator got a WARNING per runtime (270 of 300 in 4 s) where every other fleet-wide
    change of the bridge is one line. Now one line names how many, the first few and what to do; the episode
    rule still holds (the same value again within 10 minutes: DEBUG)."""
    fleet(kube, FLEET, scale_replicas=2)
    bridge = ReplicaBridge(kube_client, namespaces=[NS])
    await bridge.sync()
    for _ in range(2):
        for i in range(FLEET):
            kube.update_object("servingruntimes", NS, f"rt{i}", lambda o: o["spec"].update(replicas=5))
        with caplog.at_level(logging.INFO, logger="autoscaler.actuation.bridge"):
            await bridge.sync()
        assert all(kube.serving_runtime_replicas(NS, f"rt{i}") == 2 for i in range(FLEET))

    warnings = [r.getMessage() for r in caplog.records
                if r.name == "autoscaler.actuation.bridge" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(
        f"{FLEET} ServingRuntimes' spec.replicas were set outside their RuntimeScales (by hand, or by a tool that "
        "applies their manifests), and set back: ml/rt0 (5 -> 2), ")
    assert f" and {FLEET - NAMED} more" in warnings[0]
    assert "leave spec.replicas out of applied ServingRuntime manifests" in warnings[0]
    assert len(warnings[0]) < LONGEST_LINE


async def carried_lines(scaled: int) -> list[str]:
    """The bridge's lines about carried replicas in one pass that scales `scaled` runtimes from 2 to 5."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    async with FakeKubeApi() as kube:
        fleet(kube, scaled, scale_replicas=5)
        with tempfile.TemporaryDirectory() as folder:
            config = kube.write_kubeconfig(Path(folder) / "kubeconfig", namespace=NS)
            client = await connect(config, timeout_s=30.0)
            handler, logger = Keep(logging.INFO), logging.getLogger("autoscaler.actuation.bridge")
            logger.addHandler(handler)
            # setLevel, not `.level =`: it clears the cached answer of a logger asked before at another level
            level = logger.level
            logger.setLevel(logging.INFO)
            try:
                await ReplicaBridge(client, namespaces=[NS]).sync()
            finally:
                logger.removeHandler(handler)
                logger.setLevel(level)
                await client.close()
    return [line for line in lines if "->" in line]


@settings(max_examples=6, deadline=None)
@given(scaled=st.integers(min_value=1, max_value=2 * NAMED + 3))
def test_every_scaled_runtime_is_said_once_and_a_few_by_name(scaled: int) -> None:
    """Whatever the number scaled in one pass: up to `NAMED`, one line each, as before; beyond, one line that
    counts them all and names the first `NAMED`."""
    carried = asyncio.run(carried_lines(scaled))
    if scaled <= NAMED:
        assert sorted(carried) == sorted(f"RuntimeScale {NS}/rt{i}: ServingRuntime rt{i} spec.replicas 2 -> 5"
                                         for i in range(scaled))
    else:
        [line] = carried
        assert line.startswith(f"{scaled} RuntimeScales: ")
        assert len(re.findall(r"\(2 -> 5\)", line)) == NAMED
        assert line.endswith(f" and {scaled - NAMED} more")


@pytest.mark.parametrize("runtimes", [1, NAMED + 1], ids=["a line each", "one counted line"])
async def test_a_servingruntime_without_spec_replicas_is_said_unset_not_none(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture, runtimes: int,
) -> None:
    """Was: `ServingRuntime rt0 spec.replicas None -> 2`, a Python None in the platform engineer's log."""
    for i in range(runtimes):
        kube.add_serving_runtime(NS, f"rt{i}", replicas=None)
        kube.add_modelmesh_runtime(NS, f"modelmesh-serving-rt{i}", replicas=2)
        kube.add_runtime_scale(NS, f"rt{i}", replicas=2)
    with caplog.at_level(logging.INFO, logger="autoscaler.actuation.bridge"):
        await ReplicaBridge(kube_client, namespaces=[NS]).sync()
    carried = [line for line in bridge_lines(caplog) if "->" in line]
    assert carried, bridge_lines(caplog)
    assert not [line for line in carried if "None" in line], carried
    if runtimes == 1:
        assert carried == [f"RuntimeScale {NS}/rt0: ServingRuntime rt0 spec.replicas unset -> 2"]
    else:
        assert len(re.findall(r"\(unset -> 2\)", carried[0])) == NAMED, carried


async def test_a_servingruntime_whose_spec_replicas_was_removed_is_said_removed(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture,
) -> None:
    """Was: `ServingRuntime ml/rt0 spec.replicas was set to unset outside RuntimeScale ml/rt0`."""
    fleet(kube, 1, scale_replicas=2)
    bridge = ReplicaBridge(kube_client, namespaces=[NS])
    await bridge.sync()
    kube.update_object("servingruntimes", NS, "rt0", lambda o: o["spec"].pop("replicas"))
    with caplog.at_level(logging.INFO, logger="autoscaler.actuation.bridge"):
        await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "rt0") == 2
    [line] = [r.getMessage() for r in caplog.records
              if r.name == "autoscaler.actuation.bridge" and r.levelno == logging.WARNING]
    assert line.startswith(f"ServingRuntime {NS}/rt0 spec.replicas was removed outside RuntimeScale {NS}/rt0 "), line
