"""Every producer of a `PodSample` hands over valid values only (the promise the policies rely on).

The decisions do not check a sample's values again (`PodSample`): a NaN, infinite or negative reading must
be made absent where it is read, never reach the policies and never read as zero ("idle"). Held here for
the exporter text reader (the scrape source and the demo), the Prometheus source's value reader and the
simulator; the Prometheus source's counting and logging of garbage is in test_prometheus_source.py.
"""

from __future__ import annotations

import math
from collections import deque

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample
from autoscaler.policies.samples import clean_sample, valid_value
from autoscaler.simulation.pods import SimPod, sample
from exporter import names
from tests.policies.builders import PROPERTIES
from tests.support.exporter_texts import parse_exporter_text

SCRAPED_AT = 1_700_000_000.0

GARBAGE = ["NaN", "+Inf", "-Inf", "-1", "-0.5", "-1e-9"]
value_text = st.one_of(st.sampled_from([*GARBAGE, "0", "0.25", "1", "3", "12.5", "1e3"]),
                       st.floats(allow_nan=True, allow_infinity=True).map(repr))


def exporter_text(values: dict[str, str], gpus: list[str], modelmesh_at: str, gpu_at: str) -> str:
    lines = [f"{name} {value}" for name, value in values.items()]
    lines += [f'{names.GPU_BUSY_RATIO}{{gpu="{i}"}} {value}' for i, value in enumerate(gpus)]
    lines.append(f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="{names.COLLECTOR_MODELMESH}"}} {modelmesh_at}')
    lines.append(f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="{names.COLLECTOR_GPU}"}} {gpu_at}')
    return "\n".join(lines) + "\n"


def assert_valid(pod: PodSample) -> None:
    assert clean_sample(pod) is pod, pod


SCALARS = [names.REQUESTS_PER_SECOND, names.QUEUE_DELAY_SECONDS, names.CACHE_MISSES_PER_SECOND,
           names.LRU_AGE_SECONDS, names.CACHE_USED_RATIO, names.MODELS_LOADED]


@PROPERTIES
@given(
    values=st.fixed_dictionaries({name: value_text for name in SCALARS}),
    gpus=st.lists(value_text, max_size=4),
    modelmesh_at=value_text,
    gpu_at=value_text,
)
def test_exporter_text_never_yields_an_invalid_sample(
    values: dict[str, str], gpus: list[str], modelmesh_at: str, gpu_at: str
) -> None:
    assert_valid(parse_exporter_text(exporter_text(values, gpus, modelmesh_at, gpu_at), "p", True, SCRAPED_AT))


def test_garbled_exporter_values_are_absent_not_zero() -> None:
    text = exporter_text(
        {names.REQUESTS_PER_SECOND: "20", names.QUEUE_DELAY_SECONDS: "NaN", names.LRU_AGE_SECONDS: "-3",
         names.CACHE_USED_RATIO: "+Inf", names.MODELS_LOADED: "2"},
        ["NaN"], str(SCRAPED_AT - 5), str(SCRAPED_AT - 5),
    )
    pod = parse_exporter_text(text, "p", True, SCRAPED_AT)
    assert (pod.requests_per_second, pod.models_loaded) == (20.0, 2.0)
    assert (pod.queue_delay_s, pod.lru_age_s, pod.cache_used_ratio, pod.gpu_busy) == (None, None, None, None)


@PROPERTIES
@given(raw=value_text)
def test_prometheus_values_are_finite_and_non_negative_or_absent(raw: str) -> None:
    value = valid_value(raw)
    assert value is None or (math.isfinite(value) and value >= 0.0)


def test_prometheus_garbage_is_absent() -> None:
    assert [valid_value(raw) for raw in [*GARBAGE, "x", "2.5"]] == [None] * 7 + [2.5]


def test_simulated_pod_with_a_garbled_reading_reports_it_absent() -> None:
    pod = SimPod("sim-1", created_at=0.0, ready_at=0.0, ready=True)
    pod.busy, pod.served, pod.queue = deque([0.5]), deque([10.0]), deque([math.nan])
    reported = sample(pod, 100.0, cache_models=4, recent_models=None)
    assert_valid(reported)
    assert (reported.gpu_busy, reported.requests_per_second, reported.queue_delay_s) == (0.5, 10.0, None)
