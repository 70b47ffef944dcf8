"""An exporter horizon below `target_lru_age_s` (docs/design.md, Recommendation): the cache need would count the copies
served within the horizon only, so the cache term may rise but not fall, and /debug warns naming both settings.
Decided through `decide` and read in /debug as a user reads it."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeView
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from tests.policies.builders import KEY, NOW, PROPERTIES, pod, snapshot
from tests.support.debug_answers import debug_body

WINDOW = 30.0


def one_pod(served_ago_s: list[float], horizon_s: float | None, now: float = NOW) -> tuple[PodSample, ...]:
    """One Ready pod of 10 models' capacity (5 loaded at half its cache) that served a model at each age."""
    base = pod("pod-0", gpu=0.1, rps=1.0, queue=0.0, lru=60.0, cache=0.5, models=5.0, now=now)
    served = {f"m{i}": now - ago for i, ago in enumerate(served_ago_s)}
    return (replace(base, recent_models=served, recency_horizon_s=horizon_s),)


def debug(view: RuntimeView) -> dict[str, object]:
    shown: dict[str, object] = json.loads(debug_body(view))
    return shown


def test_a_short_horizon_is_warned_in_debug_naming_both_settings_and_what_to_set() -> None:
    view, _ = decide(snapshot(one_pod([1.0] * 12, horizon_s=120.0)), RuntimePolicy(), None, NOW, WINDOW)
    warnings = debug(view)["warnings"]
    assert warnings == [
        f"runtime {KEY}: the exporters keep per-model use for 120 s (--model-recency-horizon), less than "
        "target_lru_age_s 600 s: the cache need counts only the models served within 120 s, so the cache term is "
        "held (may rise, not fall). Set the exporter sidecar's --model-recency-horizon "
        "(EXPORTER_MODEL_RECENCY_HORIZON) to at least 600, or lower target_lru_age_s (config file or annotation "
        "autoscaler.modelmesh.io/target-lru-age-s) to at most 120"]


def test_a_horizon_of_target_lru_age_or_more_or_none_said_is_not_warned_and_the_need_falls() -> None:
    for horizon in (600.0, 3600.0, None):  # None: an exporter from before the series
        busy, memory = decide(snapshot(one_pod([1.0] * 12, horizon)), RuntimePolicy(), None, NOW, WINDOW)
        assert busy.proposals["cache"] == 2  # 12 copies / 10 a pod
        idle, _ = decide(snapshot(one_pod([], horizon, NOW + 1)), RuntimePolicy(), memory, NOW + 1, WINDOW)
        assert (idle.proposals["cache"], debug(idle)["warnings"]) == (0, []), horizon


@PROPERTIES
@given(
    horizon=st.floats(min_value=1.0, max_value=599.0),
    before=st.lists(st.floats(min_value=0.0, max_value=599.0), max_size=30),
    after=st.lists(st.floats(min_value=0.0, max_value=599.0), max_size=30),
)
def test_with_a_short_horizon_the_cache_proposal_never_falls(
        horizon: float, before: list[float], after: list[float]) -> None:
    """Whatever the exporter keeps next (fewer models: some served before its horizon, dropped), the cache
    proposal shown in /debug is at least the last one, and /debug says why where it is held up."""
    policy = RuntimePolicy()
    first, memory = decide(snapshot(one_pod(before, horizon)), policy, RuntimeMemory(), NOW, WINDOW)
    later = NOW + 5.0
    second, _ = decide(snapshot(one_pod(after, horizon, later), now=later), policy, memory, later, WINDOW)
    last, now = first.proposals["cache"], second.proposals["cache"]
    assert last is not None and now is not None
    assert now >= last
    if -(-len(after) // 10) < last:  # what the kept models alone would propose is below the last: held
        assert "--model-recency-horizon" in str(debug(second)["held"]), debug(second)["held"]
