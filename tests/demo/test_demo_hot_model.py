"""The hot model's requests in the demo, as ModelMesh routes them: over its copies, least busy copy first.

The table showed `demo-0  345` against a target of 100 through the whole hot phase at maxReplicas, though the pods
the scale-up added hold copies of demo-0's models: only the other pods' load fell as pods came.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.demo.fleet import DemoPod
from autoscaler.demo.hot_model import fill_least_busy_first, hot_model_pods, pod_loads
from autoscaler.demo.run import Demo
from autoscaler.demo.scenario import PHASES, TARGET_RPS_PER_POD
from exporter import names
from tests.demo.demo_output import unwrap

HOT, DROP = PHASES[1], PHASES[2]


def demo_with(pods: int, added: int, clock: Callable[[], float] = time.monotonic) -> Demo:
    """A demo whose fleet has `pods` original pods and `added` pods a scale-up started, all Ready; their fake
    ModelMesh containers count requests on `clock`."""
    demo = Demo(pods, 60.0, 3.0, Path(tempfile.gettempdir()))
    for index in range(pods + added):
        models = f"demo-{index}" if index < pods else "demo-0"
        fake = FakeModelMesh(ModelMeshLoad(requests_per_second=0.0, models_loaded=6), clock,
                             model_prefix=models)
        demo.fleet.pods.append(DemoPod(f"demo-{index}", fake, 0, 0, created_at=float(index), models=models,
                                       ready=True))
    return demo


def loads(demo: Demo) -> dict[str, float]:
    return {p.name: p.fake.load.requests_per_second for p in demo.fleet.pods}


def test_the_hot_pod_is_relieved_once_added_pods_hold_copies() -> None:
    """The exact loads the README gives, from the demo's own parameters: 330/30/30/30 before the copies are Ready
    (the average 105 looks fine), 75 on the hot pod and each of its four copies, 15 on the other three, once
    they are."""
    demo = demo_with(4, 0)
    demo.apply_phase(HOT)
    alone = loads(demo)
    assert alone == pytest.approx({"demo-0": 330.0, "demo-1": 30.0, "demo-2": 30.0, "demo-3": 30.0})
    assert sum(alone.values()) / len(alone) <= 1.1 * TARGET_RPS_PER_POD  # the average looks fine
    more = demo_with(4, 4)
    more.apply_phase(HOT)
    assert loads(more) == pytest.approx({"demo-0": 75.0, "demo-1": 15.0, "demo-2": 15.0, "demo-3": 15.0,
                                         "demo-4": 75.0, "demo-5": 75.0, "demo-6": 75.0, "demo-7": 75.0})


def test_a_removed_copy_is_loaded_again_on_a_kept_pod_while_the_model_is_hot() -> None:
    """Removing a copy sent its share back to the hot pod: the adapter's skew-aware load rose again, and the demo
    scaled up right after the traffic drop, starting a pod that the next scale-down removed before it ever
    started. ModelMesh keeps a hot model's copies while it is hot: a copy whose pod goes is loaded on a kept pod,
    the least busy (here all are level: the oldest). From 8 pods down to 5 the load stays level, 84 on each:
    420 req/s, which needs the 5 pods it has."""
    demo = demo_with(4, 4)
    demo.apply_phase(HOT)
    for gone in ("demo-7", "demo-6", "demo-5"):
        demo.fleet.pods = [p for p in demo.fleet.pods if p.name != gone]
        demo.apply_phase(HOT)
        after = loads(demo)
        assert sum(after.values()) == pytest.approx(420.0)
        assert after["demo-0"] <= 84.0 + 1e-6, (gone, after)
    assert loads(demo) == pytest.approx(dict.fromkeys(("demo-0", "demo-1", "demo-2", "demo-3", "demo-4"), 84.0))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0, 500), min_size=1), st.floats(0, 1000))
def test_requests_go_to_the_least_busy_copy_first(base: dict[str, float], hot: float) -> None:
    copies = sorted(base)
    spread = fill_least_busy_first(base, copies, hot)
    assert sum(spread.values()) == pytest.approx(hot, abs=1e-6)
    assert all(share >= -1e-9 for share in spread.values())
    reached = [name for name in copies if spread[name] > 1e-9]
    if reached:
        level = max(base[name] + spread[name] for name in reached)
        for name in copies:
            assert base[name] + spread[name] == pytest.approx(level, abs=1e-6) or base[name] >= level - 1e-6


def test_each_ready_pod_shares_the_background() -> None:
    assert pod_loads(["a", "b"], [], 100.0, 0.0) == {"a": 50.0, "b": 50.0}
    assert pod_loads([], ["a"], 100.0, 50.0) == {}


def models_served(fake: FakeModelMesh) -> set[str]:
    """The models a fake ModelMesh's invoke histogram has counted requests for: what its exporter reports as the
    pod's recent models, which the adapter's "models only it served" is counted from."""
    families = [family for family in fake.collect() if family.name == names.MM_INVOKE_MODEL_MS]
    return {sample.labels["modelId"] for family in families for sample in family.samples
            if sample.name.endswith("_count") and sample.value > 0}


def test_a_copy_loaded_again_on_an_original_pod_is_served_there() -> None:
    """The demo said "ModelMesh loads the hot model again on demo-1", but demo-1 went on serving its own six models
    only: once the scale-up's copies were gone, the table showed "6 models only it served" for demo-0, the hot pod,
    though the demo had just said its hot model has copies on demo-1, demo-2 and demo-3. A copy loaded again is
    now one of the models the pod serves, and its requests count for that model."""
    now = [0.0]
    demo = demo_with(4, 4, clock=lambda: now[0])
    hot_model = demo.fleet.pods[0].fake.model_ids[0]
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        demo.apply_phase(HOT)
        for gone in ("demo-7", "demo-6", "demo-5", "demo-4"):
            now[0] += 1.0
            demo.fleet.pods = [p for p in demo.fleet.pods if p.name != gone]
            demo.apply_phase(HOT)
        now[0] += 1.0
    assert "loads the hot model again on demo-1" in unwrap(printed.getvalue())
    served = {pod.name: models_served(pod.fake) for pod in demo.fleet.pods}
    for name in ("demo-1", "demo-2", "demo-3"):
        assert hot_model in served[name], (name, served)
    only_there = {name: len(models - set().union(*(m for n, m in served.items() if n != name)))
                  for name, models in served.items()}
    assert only_there == {"demo-0": 5, "demo-1": 6, "demo-2": 6, "demo-3": 6}


def test_after_the_drop_only_the_pods_holding_the_hot_model_serve_it() -> None:
    """After the traffic drop the hot model's 30 req/s went to demo-1 as well as to the pods holding it (demo-0 and
    the scale-up's copies), and the demo said "ModelMesh loads the hot model again on demo-1" of a model no pod is
    busy with: the table read demo-1 14 against demo-2 7. Two copies left beside the hot pod, one pod's worth of
    load: it stays on the pods that hold it, 40 / 6 + 10 on each of those three, 40 / 6 on the others."""
    demo = demo_with(4, 2)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        demo.apply_phase(HOT)
        demo.apply_phase(DROP)
    assert "loads the hot model again" not in printed.getvalue()
    holding, others = 40 / 6 + 10, 40 / 6
    assert loads(demo) == pytest.approx({"demo-0": holding, "demo-1": others, "demo-2": others, "demo-3": others,
                                         "demo-4": holding, "demo-5": holding})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=10), st.integers(0, 12))
def test_the_hot_model_keeps_its_holders_and_no_more_copies_than_it_keeps(holds: list[bool], keep: int) -> None:
    ready = [f"pod-{index}" for index in range(len(holds))]
    holders = [name for name, held in zip(ready, holds, strict=True) if held]
    copies = hot_model_pods(ready, holders, keep)
    """Every pod holding the hot model serves it, and beyond them it is loaded on others only up to the copies it
    keeps (at least one): a negative slice once added a copy after the drop, where it keeps one and holds three."""
    assert set(holders) <= set(copies) <= set(ready)
    assert len(copies) <= max(len(holders), keep, 1)
    assert len(copies) >= min(max(keep, 1), len(ready))
