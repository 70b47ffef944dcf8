"""The words of a held runtime's `reason` and `held` (its log line, /debug) say `stale` and `missing` as
/debug's `pods[].signals` do, pod for pod.

The docs define them apart: a signal is stale where its newest sample is too old (the exporter not read, hung, or
its collector's reading old), missing where the pod's exporter answers without it while others report it. A dead
or hung exporter's pod showed `stale` on every signal in /debug, yet the reason said `gpu missing on 1 of 3 ready
pods` and `gpu proposal held: gpu missing on 1 ready pods`, words the docs' troubleshooting reads as a pod whose
exporter answers without a GPU reading, and sends the on-call to GPU visibility rather than to the exporter that
does not answer. The GPU alone kept the stale pods in its count (it has its own timestamp: its reading may be
stale on a pod whose load is fresh), and the held words called every pod not fresh "missing".
"""

from __future__ import annotations

import re
from dataclasses import replace

from hypothesis import example, given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeView
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from tests.policies.builders import NOW, PROPERTIES, pod, snapshot

WINDOW = 30.0
FAULTS = ("ok", "ok", "stale", "gpu_stale", "gpu_held", "no_gpu", "no_rps", "no_cache", "not_ready")
"""What each pod does at a refresh: all fine; its exporter not read for 5 minutes (`stale`); its GPU reading
old on a pod whose load is fresh (`gpu_stale`: a hung GPU collector), or kept from a read that had none
(`gpu_held`); an answer without its GPU busy, request rate or cache state; not Ready."""

REASON_SIGNAL = re.compile(r"\b(gpu|requests|queue|cache) (stale|missing) on (\d+) of (\d+) ready pods")
REASON_PODS_STALE = re.compile(r"\b(\d+) of (\d+) ready pods stale\b")
HELD = re.compile(r"^(gpu|requests|queue|cache) (stale on (\d+)(?: and missing on (\d+))?|missing on (\d+)) ready pods")


def faulty_pod(index: int, fault: str, load: float, now: float) -> PodSample:
    sample = pod(f"pod-{index}", gpu=None if fault == "no_gpu" else load,
                 rps=None if fault == "no_rps" else 100.0 * load, queue=0.0,
                 cache=None if fault == "no_cache" else 0.5, lru=600.0, models=4.0,
                 age=300.0 if fault == "stale" else 3.0, ready=fault != "not_ready", now=now)
    if fault == "gpu_stale":
        return replace(sample, gpu_sampled_at=now - 300.0)
    if fault == "gpu_held":
        return replace(sample, gpu_sampled_at=now - 3.0, gpu_held=True)
    return sample


def states(view: RuntimeView, signal: str, state: str, *, fresh_only: bool = False) -> int:
    """Ready pods whose /debug `signals` give `signal` the state `state` (`fresh_only`: among the fresh pods)."""
    return sum(1 for p in view.pods if p.ready and (p.fresh or not fresh_only) and dict(p.signals)[signal] == state)


def check_words(view: RuntimeView) -> None:
    """Every count of the reason and the held words is /debug's, state for state; and while values are served,
    the reason names every state /debug shows that holds them."""
    ready = sum(1 for p in view.pods if p.ready)
    for signal, state, count, of in REASON_SIGNAL.findall(view.reason):
        assert int(of) == ready, view.reason
        # A stale pod is said once, in "N of M ready pods stale"; a signal's own "stale on" is a pod whose load
        # is fresh (a GPU reading old on its own clock).
        assert int(count) == states(view, signal, state, fresh_only=state == "stale"), (view.reason, view.pods)
    for count, of in REASON_PODS_STALE.findall(view.reason):
        assert int(of) == ready, view.reason
        assert int(count) == sum(1 for p in view.pods if p.ready and not p.fresh), (view.reason, view.pods)
    for what, why in view.held.items():
        found = HELD.match(why)
        if found is None:
            continue
        signal, _, stale, also_missing, missing = found.groups()
        assert int(stale or 0) == states(view, signal, "stale"), (what, why, view.pods)
        assert int(also_missing or missing or 0) == states(view, signal, "missing"), (what, why, view.pods)
    if view.known:
        for signal in ("gpu", "requests", "queue", "cache"):
            if states(view, signal, "missing"):
                assert f"{signal} missing on" in view.reason, (signal, view.reason, view.pods)
            if states(view, signal, "stale", fresh_only=True):
                assert f"{signal} stale on" in view.reason, (signal, view.reason, view.pods)


def test_a_dead_exporters_pod_is_said_stale_not_gpu_missing() -> None:
    """The reviewer's three pods, one exporter killed after the runtime was served: as the rig logged it."""
    policy = RuntimePolicy()
    memory: RuntimeMemory | None = None
    for step, fault in enumerate(["ok", "ok", "stale"]):
        now = NOW + 15.0 * step
        pods = (faulty_pod(0, "ok", 0.4, now), faulty_pod(1, fault, 0.7, now), faulty_pod(2, "ok", 1.0, now))
        view, memory = decide(snapshot(pods, now=now), policy, memory, now, WINDOW)
    assert [dict(p.signals)["gpu"] for p in view.pods] == ["fresh", "stale", "fresh"], view.pods
    assert "1 of 3 ready pods stale" in view.reason, view.reason
    assert "gpu missing" not in view.reason and "missing on" not in " ".join(view.held.values()), view
    check_words(view)


def test_a_gpu_reading_old_on_a_pod_whose_load_is_fresh_is_said_gpu_stale() -> None:
    """A hung or failing GPU collector: the pod's exporter answers, its GPU reading is old."""
    policy = RuntimePolicy()
    memory: RuntimeMemory | None = None
    for step, fault in enumerate(["ok", "ok", "gpu_stale"]):
        now = NOW + 15.0 * step
        pods = (faulty_pod(0, "ok", 0.4, now), faulty_pod(1, fault, 0.7, now), faulty_pod(2, "ok", 1.0, now))
        view, memory = decide(snapshot(pods, now=now), policy, memory, now, WINDOW)
    assert "gpu stale on 1 of 3 ready pods" in view.reason and "gpu missing" not in view.reason, view.reason
    check_words(view)


@PROPERTIES
@given(steps=st.lists(st.lists(st.tuples(st.sampled_from(FAULTS), st.floats(0.0, 1.0)), min_size=1, max_size=6),
                      min_size=1, max_size=6))
@example(steps=[[("ok", 0.4), ("ok", 0.7), ("ok", 1.0)], [("ok", 0.4), ("stale", 0.7), ("ok", 1.0)]])
@example(steps=[[("ok", 0.9), ("ok", 0.9)], [("stale", 0.1), ("no_gpu", 0.1)]])
@example(steps=[[("ok", 0.9), ("ok", 0.9)], [("gpu_stale", 0.1), ("no_gpu", 0.1)]])
def test_the_held_words_count_what_debug_shows_pod_by_pod(steps: list[list[tuple[str, float]]]) -> None:
    policy = RuntimePolicy()
    memory: RuntimeMemory | None = None
    for step, faults in enumerate(steps):
        now = NOW + 15.0 * step
        pods = tuple(faulty_pod(index, fault, load, now) for index, (fault, load) in enumerate(faults))
        view, memory = decide(snapshot(pods, now=now), policy, memory, now, WINDOW)
        check_words(view)
