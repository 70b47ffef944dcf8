"""The hot model's requests in the demo, as ModelMesh routes them: over its copies, least busy copy first.

The table showed `demo-0  345` against a target of 100 through the whole hot phase at maxReplicas, though the pods
the scale-up added hold copies of demo-0's models: only the other pods' load fell as pods came.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.demo.fake_modelmesh import FakeModelMesh, ModelMeshLoad
from autoscaler.demo.fleet import DemoPod
from autoscaler.demo.hot_model import fill_least_busy_first, pod_loads
from autoscaler.demo.run import PHASES, TARGET_RPS_PER_POD, Demo

HOT = PHASES[1]


def demo_with(pods: int, added: int) -> Demo:
    """A demo whose fleet has `pods` original pods and `added` pods a scale-up started, all Ready."""
    demo = Demo(pods, 60.0, 3.0, Path(tempfile.gettempdir()))
    for index in range(pods + added):
        models = f"demo-{index}" if index < pods else "demo-0"
        fake = FakeModelMesh(ModelMeshLoad(requests_per_second=0.0, models_loaded=6), model_prefix=models)
        demo.fleet.pods.append(DemoPod(f"demo-{index}", fake, 0, 0, created_at=float(index), models=models,
                                       ready=True))
    return demo


def loads(demo: Demo) -> dict[str, float]:
    return {p.name: p.fake.load.requests_per_second for p in demo.fleet.pods}


def test_the_hot_pod_is_relieved_once_added_pods_hold_copies_and_a_removed_copy_sends_its_share_back() -> None:
    demo = demo_with(4, 0)
    demo.apply_phase(HOT)
    alone = loads(demo)
    assert alone["demo-0"] > 3 * TARGET_RPS_PER_POD
    assert sum(alone.values()) / len(alone) <= 1.1 * TARGET_RPS_PER_POD  # the average looks fine
    more = demo_with(4, 4)
    more.apply_phase(HOT)
    relieved = loads(more)
    assert relieved["demo-0"] < TARGET_RPS_PER_POD
    assert {relieved[f"demo-{i}"] for i in range(4, 8)} == {relieved["demo-0"]}  # spread over its copies
    assert relieved["demo-1"] < relieved["demo-0"]  # an original pod has no copy of the hot model
    more.fleet.pods = [p for p in more.fleet.pods if p.name != "demo-7"]
    more.apply_phase(HOT)
    assert loads(more)["demo-0"] > relieved["demo-0"], "the removed copy's share goes back to the copies left"
    assert sum(loads(more).values()) == pytest.approx(sum(relieved.values()))


def test_the_hot_models_copies_serve_on_once_the_oldest_pod_is_removed() -> None:
    demo = demo_with(4, 2)
    demo.apply_phase(HOT)
    demo.fleet.pods = demo.fleet.pods[1:]
    demo.apply_phase(HOT)
    after = loads(demo)
    assert after["demo-4"] == after["demo-5"] > after["demo-1"]


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
