"""The shipped alert when no adapter replica leads, as a real adapter reports it.

Only the leader writes to the cluster: pod deletion costs, and with the RuntimeScale bridge on (the default where
runtimes are discovered in Kubernetes) every HPA's replicas, carried from its RuntimeScale to the ServingRuntime.
With no leader (a Role whose `resourceNames` misses the Lease: every get, update and create refused) the HPA goes on
writing its RuntimeScale, reports SuccessfulRescale, and nothing moves; the RuntimeScale's status keeps what the
last leader wrote (READY True, Bridged), and no replica publishes `runtime_scale_not_ready`, so
`ModelMeshRuntimeScaleNotReady` cannot fire. The one alert left, `ModelMeshAutoscalerNoLeader`, was a warning
about deletion costs only: nobody was told that autoscaling had stopped.

Here a real adapter leads against the fake Kubernetes API, then loses its Lease to a 403 and the HPA asks 6 of a
runtime at 3; its own /metrics, held for ten minutes, becomes `promtool test rules` input over the shipped
rules.yaml, and the alerts sent are read as Alertmanager would get them (labels and rendered annotations). The
runbook for a runtime that does not scale up is walked too: its first step must find the missing leader with the
commands it gives, run with the real kubectl, before any step trusts the READY column.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.fakes.kube import FakeKubeApi
from tests.manifests.series import ADAPTER_LABELS, adapter_metrics, attach
from tests.manifests.support import KUBECTL, REPO, alerts_sent
from tests.manifests.test_monitoring_bridge import leading_adapter

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]  # the scenario's fake API runs there

NS = "modelmesh-serving"
LEASE_NAMESPACE = "modelmesh-autoscaler"  # the adapter's own namespace (the kubeconfig's): where its Lease lives


RUNBOOK = "### A runtime does not scale up\n"


def leader_value(adapter: str) -> float | None:
    return next((s.value for s in adapter_metrics(adapter) if s.name == "modelmesh_autoscaler_leader"), None)


def ready(kube: FakeKubeApi) -> tuple[str, str] | None:
    scale: dict[str, Any] = kube.get("runtimescales", NS, "triton") or {}
    return next(((c["status"], c["reason"]) for c in (scale.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), None)


async def until(check: Callable[[], bool], timeout_s: float = 30) -> None:
    async with asyncio.timeout(timeout_s):
        while not await asyncio.to_thread(check):
            await asyncio.sleep(0.3)


def runbook_steps() -> list[str]:
    """The numbered steps of operations.md's "A runtime does not scale up", each with what follows it."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text[text.index(RUNBOOK) + len(RUNBOOK):]
    section = section[:section.index("\n### ")]
    return [step for step in re.split(r"\n(?=\d+\. )", section) if re.match(r"\d+\. ", step)]


def kubectl_lines(step: str) -> list[str]:
    """The kubectl commands of the step's sh blocks, as a reader copies them."""
    blocks = re.findall(r"```sh\n(.*?)```", step, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip().startswith("kubectl ")]


def run_kubectl(kubeconfig: Path, line: str) -> str:
    """`line` as the runbook gives it, NS and R being the RuntimeScale's namespace and name."""
    words = [{"NS": NS, "R": "triton"}.get(word, word) for word in shlex.split(line)]
    done = subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *words[1:]], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, f"{line}: {done.stderr}"
    return done.stdout


@dataclass(frozen=True)
class Seen:
    """The cluster and the adapter once no replica leads and the HPA has asked 6 of a runtime at 3."""

    leader: float | None
    """`modelmesh_autoscaler_leader` on the adapter's /metrics."""
    runtime_replicas: int | None
    ready: tuple[str, str] | None
    """The RuntimeScale's Ready condition: status, reason."""
    runbook_said: dict[str, str]
    """What each kubectl command of the runbook's first step printed."""
    leading_series: dict[str, float]
    """The adapter's `modelmesh_autoscaler_runtime_scale_*` series (as Prometheus stores them) while it led."""
    unled_series: dict[str, float]
    """The same once no replica leads and the HPA has asked 6."""
    says_what_it_does: dict[str, float]
    """The adapter-wide gauges of its /metrics that say what it does (`bridge_gauges`) once no replica leads."""


def runtime_scale_series(adapter: str) -> dict[str, float]:
    """Every `modelmesh_autoscaler_runtime_scale*` sample of the adapter's /metrics, as Prometheus stores it when
    it scrapes the adapter pod (`honor_labels`: the RuntimeScale's namespace, not the adapter's)."""
    found: dict[str, float] = {}
    for sample in adapter_metrics(adapter):
        if sample.name.startswith("modelmesh_autoscaler_runtime_scale"):
            labels = attach(ADAPTER_LABELS, sample.labels, honor_labels=True)
            found[sample.name + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"] = (
                sample.value)
    return found


def bridge_gauges(adapter: str) -> dict[str, float]:
    """The adapter's unlabelled gauges of the bridge (not its counters, `_total`), as Prometheus stores them."""
    target = ", ".join(f'{k}="{v}"' for k, v in ADAPTER_LABELS.items())
    return {f"{sample.name}{{{target}}}": sample.value for sample in adapter_metrics(adapter)
            if "bridge" in sample.name and not sample.name.endswith("_total") and not sample.labels}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def seen(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Seen]:
    tmp_path = tmp_path_factory.mktemp("no-leader")
    steps = runbook_steps()
    async with FakeKubeApi() as kube:
        kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=3)
        kube.add_serving_runtime(NS, "triton", replicas=3)
        kube.add_runtime_scale(NS, "triton", replicas=3)
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace=LEASE_NAMESPACE)
        stack = contextlib.ExitStack()
        try:
            adapter = await asyncio.to_thread(stack.enter_context, leading_adapter(kubeconfig, tmp_path))
            await until(lambda: ready(kube) == ("True", "Bridged") and leader_value(adapter) == 1)
            await asyncio.sleep(2)  # /metrics shows the refresh process's series as its last refresh sent them
            leading = await asyncio.to_thread(runtime_scale_series, adapter)
            for verb in ("get", "update", "create"):  # a Role whose resourceNames misses the Lease
                kube.forbid(verb, "leases", LEASE_NAMESPACE)
            await until(lambda: leader_value(adapter) == 0)
            kube.update_object("runtimescales", NS, "triton", lambda scale: scale["spec"].update(replicas=6))
            await asyncio.sleep(3)
            leader = await asyncio.to_thread(leader_value, adapter)
            unled = await asyncio.to_thread(runtime_scale_series, adapter)
            says = await asyncio.to_thread(bridge_gauges, adapter)
        finally:
            await asyncio.to_thread(stack.close)
        replicas, condition = kube.serving_runtime_replicas(NS, "triton"), ready(kube)
        kube.clear_faults()  # the reader's kubectl, unlike the adapter (stopped first), may read the Lease
        said = {line: await asyncio.to_thread(run_kubectl, kubeconfig, line) for line in kubectl_lines(steps[0])}
        yield Seen(leader, replicas, condition, said, leading, unled, says)


def held(leader: float, series: dict[str, float] | None = None, minutes: int = 10) -> list[dict[str, str]]:
    """`minutes` of the adapter's `leader` value and `series` as they were read, scraped every minute."""
    target = ", ".join(f'{k}="{v}"' for k, v in ADAPTER_LABELS.items())
    return [{"series": f"up{{{target}}}", "values": f"1x{minutes}"},
            {"series": f"modelmesh_autoscaler_leader{{{target}}}", "values": f"{leader:g}x{minutes}"},
            *({"series": name, "values": f"{value:g}x{minutes}"} for name, value in (series or {}).items())]


async def test_the_runtime_does_not_follow_its_hpa_and_its_runtime_scale_reads_ready(seen: Seen) -> None:
    """The state the alert and the runbook are for, as the reviewer found it."""
    assert seen.leader == 0
    assert seen.runtime_replicas == 3  # the HPA's 6 reaches nothing
    assert seen.ready == ("True", "Bridged")  # what the last leader wrote: nobody can correct it


async def test_no_leader_with_the_bridge_on_sends_a_critical_alert_that_scaling_has_stopped(
        seen: Seen, tmp_path: Path) -> None:
    assert seen.leader is not None
    sent = alerts_sent(tmp_path, held(seen.leader, seen.says_what_it_does), 10)
    no_leader = [alert for alert in sent if alert.labels["alertname"] == "ModelMeshAutoscalerNoLeader"]
    assert len(no_leader) == 1, sent
    alert = no_leader[0]
    assert alert.labels["severity"] == "critical", alert  # as ModelMeshAutoscalerDown: nothing scales
    said = " ".join((alert.annotations["summary"], alert.annotations["description"]))
    for words in ("HPA", "ServingRuntime", "READY", "kubectl -n modelmesh-autoscaler get lease"):
        assert words in said, f"the alert does not say {words!r}: {said}"
    assert "scal" in alert.annotations["summary"].lower(), alert.annotations["summary"]


async def test_the_runbooks_first_step_finds_no_leader_before_any_step_trusts_ready(seen: Seen) -> None:
    steps = runbook_steps()
    assert "lead" in steps[0].split("\n")[0].lower(), f"the runbook starts elsewhere: {steps[0][:200]}"
    lease = [out for line, out in seen.runbook_said.items() if " lease " in f" {line} "]
    assert lease and "holderIdentity" in lease[0] and "renewTime" in lease[0], seen.runbook_said
    generations = [out.split() for line, out in seen.runbook_said.items() if "generation" in line.lower()]
    assert generations and len(generations[0]) == 2, seen.runbook_said
    generation, observed = (int(word) for word in generations[0])
    assert generation > observed, f"the status looks current: {generations[0]}"  # stale, as the step says


async def test_a_runtime_scale_whose_ask_nobody_answers_is_named_by_an_alert(seen: Seen, tmp_path: Path) -> None:
    """The RuntimeScale's READY stays True, written by the last leader, and no replica may correct it: the
    replicas that watch it still see that its status was written for an older spec than the HPA's, and say so,
    so that an alert names the RuntimeScale (NoLeader names none, and cannot see a leader that does not carry)."""
    assert seen.leader is not None
    sent = alerts_sent(tmp_path, held(seen.leader, seen.unled_series, 20), 20)
    named = [alert for alert in sent if alert.labels.get("runtimescale") == "triton"]
    assert [alert.labels.get("namespace") for alert in named] == [NS], sent
    said = named[0].annotations["description"]
    for words in ("kubectl", "observedGeneration", "ModelMeshAutoscalerNoLeader"):
        assert words in said, f"the alert does not say {words!r}: {said}"


async def test_a_runtime_scale_whose_ask_the_leader_carried_fires_nothing(seen: Seen, tmp_path: Path) -> None:
    sent = alerts_sent(tmp_path, held(1, seen.leading_series, 60), 60)
    assert sent == [], sent


@dataclass(frozen=True)
class SeenWithoutBridge:
    """An adapter run with `--bridge off` (deletion costs on) once no replica leads."""

    leader: float | None
    says_what_it_does: dict[str, float]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def seen_without_bridge(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SeenWithoutBridge]:
    tmp_path = tmp_path_factory.mktemp("no-leader-no-bridge")
    async with FakeKubeApi() as kube:
        kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=3)
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace=LEASE_NAMESPACE)
        with contextlib.ExitStack() as stack:
            adapter = await asyncio.to_thread(stack.enter_context, leading_adapter(
                kubeconfig, tmp_path, "--bridge", "off", "--deletion-cost", "on"))
            await until(lambda: leader_value(adapter) == 1)
            for verb in ("get", "update", "create"):
                kube.forbid(verb, "leases", LEASE_NAMESPACE)
            await until(lambda: leader_value(adapter) == 0)
            await asyncio.sleep(2)
            yield SeenWithoutBridge(await asyncio.to_thread(leader_value, adapter),
                                    await asyncio.to_thread(bridge_gauges, adapter))


async def test_no_leader_with_the_bridge_off_warns_that_deletion_costs_stop_and_pages_nobody(
        seen_without_bridge: SeenWithoutBridge, tmp_path: Path) -> None:
    """With `--bridge off` the leader writes deletion costs only: without one the runtimes still scale (whatever
    carries the HPAs' replicas does not need this adapter), and scale-downs remove the ReplicaSet's choice of
    pod. A warning's worth, not a critical page that says scaling stopped."""
    seen = seen_without_bridge
    assert seen.leader == 0
    sent = alerts_sent(tmp_path, held(seen.leader, seen.says_what_it_does), 10)
    assert [alert for alert in sent if alert.labels["severity"] == "critical"] == [], sent
    no_leader = [alert for alert in sent if "NoLeader" in alert.labels["alertname"]]
    assert len(no_leader) == 1, sent
    alert = no_leader[0]
    assert alert.labels["severity"] == "warning", alert
    said = " ".join((alert.annotations["summary"], alert.annotations["description"]))
    assert "deletion cost" in alert.annotations["summary"].lower(), alert.annotations["summary"]
    for words in ("--bridge off", "kubectl -n modelmesh-autoscaler get lease"):
        assert words in said, f"the alert does not say {words!r}: {said}"
    assert "reach no runtime" not in said, said


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def unled_without_per_runtime(
        tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[dict[str, float], Path]]:
    """The RuntimeScale series of an adapter run with `--per-runtime-metrics off` once no replica leads and the HPA
    has asked 6 of a runtime at 3, with its leader and bridge gauges; and the cluster's kubeconfig, for a reader's
    kubectl."""
    tmp_path = tmp_path_factory.mktemp("no-leader-no-per-runtime")
    async with FakeKubeApi() as kube:
        kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=3)
        kube.add_serving_runtime(NS, "triton", replicas=3)
        kube.add_runtime_scale(NS, "triton", replicas=3)
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace=LEASE_NAMESPACE)
        with contextlib.ExitStack() as stack:
            adapter = await asyncio.to_thread(stack.enter_context, leading_adapter(
                kubeconfig, tmp_path, "--per-runtime-metrics", "off"))
            await until(lambda: ready(kube) == ("True", "Bridged") and leader_value(adapter) == 1)
            for verb in ("get", "update", "create"):
                kube.forbid(verb, "leases", LEASE_NAMESPACE)
            await until(lambda: leader_value(adapter) == 0)
            kube.update_object("runtimescales", NS, "triton", lambda scale: scale["spec"].update(replicas=6))
            await asyncio.sleep(3)
            series = {**await asyncio.to_thread(runtime_scale_series, adapter),
                      **await asyncio.to_thread(bridge_gauges, adapter)}
        yield series, kubeconfig


async def test_runtime_scales_left_behind_are_alerted_on_with_per_runtime_metrics_off(
        unled_without_per_runtime: tuple[dict[str, float], Path], tmp_path: Path) -> None:
    """`--per-runtime-metrics off` drops the series of each RuntimeScale, the stale status's among them, so that
    nothing but NoLeader fired: a leader that holds the Lease but does not bridge (another installation's, one run
    with --bridge off) left every RuntimeScale behind without an alert. The page still names the namespace."""
    series, kubeconfig = unled_without_per_runtime
    sent = alerts_sent(tmp_path, held(0, series, 20), 20)
    named = [alert for alert in sent if "NoLeader" not in alert.labels["alertname"]]
    assert [alert.labels.get("namespace") for alert in named] == [NS], sent
    said = named[0].annotations["summary"] + " " + named[0].annotations["description"]
    for words in ("kubectl", "observedGeneration", "ModelMeshAutoscalerNoLeader", "1 RuntimeScale"):
        assert words in said, f"the alert does not say {words!r}: {said}"
    # The alert cannot name the RuntimeScale: the command it gives does, with the two generations apart.
    command = next(line for line in re.findall(r"`([^`]*)`", said) if line.startswith("kubectl "))
    listed = [line.split() for line in (await asyncio.to_thread(run_kubectl, kubeconfig, command)).splitlines()[1:]]
    assert [(name, int(generation) > int(observed)) for name, generation, observed in listed] == [("triton", True)], (
        command, listed)
