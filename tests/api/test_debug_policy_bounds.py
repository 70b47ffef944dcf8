"""/debug's `policy` shows the replica bounds that apply. The HPA's `minReplicas`/`maxReplicas` fill the bounds
the config leaves unset (docs/design.md, Bounds); /debug said `"max_replicas": {"value": null, "from":
"built-in"}` beside `"bounds": [2, 10]`, so an operator read "no cap" from the policy and could not tell where the
10 came from. Now a bound the HPA filled in says so.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.api.debug_document import debug_json, explanation
from autoscaler.api.render import render_snapshot
from autoscaler.model import PodSample, RuntimeSnapshot
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults
from tests.api.builders import KEY, NOW
from tests.support.debug_answers import debug_body

HPA_FILLED = "the HPA's {} (the config leaves it unset)"


class OneRuntime(SourceDefaults):
    """A source with one runtime of two fresh pods, its Deployment annotated with `annotations`."""

    name = "static"
    errors: dict[str, int] = {}

    def __init__(self, annotations: dict[str, str] | None = None) -> None:
        self.annotations = annotations or {}

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        pods = tuple(PodSample(name=f"p-{i}", sampled_at=now - 1, gpu_busy=0.5, requests_per_second=10.0,
                               queue_delay_s=0.0, lru_age_s=900.0, cache_used_ratio=0.5, models_loaded=1.0)
                     for i in range(2))
        return [RuntimeSnapshot(KEY, pods, now, replicas=2, annotations=self.annotations)]

    async def close(self) -> None:
        return None


async def shown_policy(book: PolicyBook, hpa: tuple[int | None, int | None] | None,
                       annotations: dict[str, str] | None = None, refreshes: int = 1) -> dict[str, Any]:
    refresher = Refresher(OneRuntime(annotations), book, AdapterMetrics(), clock=lambda: NOW)
    if hpa is not None:
        refresher.hpa_bounds = lambda key: hpa
    for _ in range(refreshes):
        await refresher.refresh_once()
    snapshot = render_snapshot(refresher.views, True, policies=book)
    record = snapshot.runtimes.debug_record((KEY.namespace, KEY.deployment))
    assert record is not None
    document: dict[str, Any] = json.loads(debug_json(record))
    return document


async def test_bounds_the_hpa_filled_in_say_so() -> None:
    document = await shown_policy(PolicyBook(), (2, 10))
    assert document["bounds"] == [2, 10]
    assert document["policy"]["min_replicas"] == {"value": 2, "from": HPA_FILLED.format("minReplicas")}
    assert document["policy"]["max_replicas"] == {"value": 10, "from": HPA_FILLED.format("maxReplicas")}


async def test_bounds_the_config_sets_stay_the_configs() -> None:
    document = await shown_policy(PolicyBook(RuntimePolicy(max_replicas=6)), (2, 10))
    assert document["bounds"] == [2, 6]
    assert document["policy"]["max_replicas"]["value"] == 6
    assert "HPA" not in str(document["policy"]["max_replicas"]["from"])
    assert document["policy"]["min_replicas"] == {"value": 2, "from": HPA_FILLED.format("minReplicas")}


async def test_a_max_replicas_below_the_hpas_min_is_said_once_and_the_bounds_stay_possible(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """max-replicas=2 under an HPA with minReplicas 3 showed `bounds: [3, 2]`, `winner: max_replicas`, and was said
    nowhere."""
    with caplog.at_level(logging.WARNING):
        document = await shown_policy(PolicyBook(), (3, 10), {"autoscaler.modelmesh.io/max-replicas": "2"}, 3)
    low, high = document["bounds"]
    assert (low, high) == (1, 2)  # the config's bound wins, as it does over a contradicting HPA maxReplicas
    assert "the HPA's minReplicas 3" in document["policy"]["min_replicas"]["ignored"], document["policy"]
    [warning] = [r.getMessage() for r in caplog.records if "minReplicas" in r.getMessage()]
    assert "max_replicas 2 (annotation autoscaler.modelmesh.io/max-replicas)" in warning, warning
    assert "the HPA's minReplicas 3" in warning, warning


async def test_a_min_replicas_above_the_hpas_max_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    """min-replicas=12 under an HPA capped at 10 dropped the HPA's cap without a word."""
    with caplog.at_level(logging.WARNING):
        document = await shown_policy(PolicyBook(), (3, 10), {"autoscaler.modelmesh.io/min-replicas": "12"}, 3)
    assert document["bounds"] == [12, None]
    assert "the HPA's maxReplicas 10" in document["policy"]["max_replicas"]["ignored"], document["policy"]
    [warning] = [r.getMessage() for r in caplog.records if "maxReplicas" in r.getMessage()]
    assert "min_replicas 12 (annotation autoscaler.modelmesh.io/min-replicas)" in warning, warning


async def test_without_an_hpa_the_built_in_bounds_are_shown_as_built_in() -> None:
    document = await shown_policy(PolicyBook(), None)
    assert document["bounds"] == [1, None]
    assert document["policy"]["max_replicas"] == {"value": None, "from": "built-in"}


@given(st.integers(1, 5), st.integers(5, 50))
def test_both_ways_of_writing_debug_agree_on_hpa_bounds(low: int, high: int) -> None:
    from dataclasses import replace

    from tests.api.builders import runtime_view

    view = replace(runtime_view(), bounds=(low, high))
    book = PolicyBook()
    book.policy_for(KEY)
    assert debug_body(view, book.explain(KEY)) == json.dumps(explanation(view, book.explain(KEY))).encode()
