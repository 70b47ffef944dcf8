"""Never scale up on garbage: whatever finite value one pod's exporter sends above its signal's ceiling, read by the
real exporter-text reader and decided by the real policy, the runtime's desired replicas are no more than the
other pods' values imply (the garbage pod reading like the busiest of them). Was: one pod's request rate of 1e308
made desired_replicas 1,000,000 (the proposal limit), and a queue delay of 1e6 s made it 16,670.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey, RuntimeSnapshot
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.samples import CEILINGS
from autoscaler.sources.exposition import SCALAR_FIELDS
from exporter import names
from tests.policies.builders import PROPERTIES
from tests.support.exporter_texts import parse_exporter_text

NOW = 1_700_000_000.0
KEY = RuntimeKey("ml", "modelmesh-serving-x")
POLICY = RuntimePolicy(target_rps_per_pod=20.0)
FIELDS = {**SCALAR_FIELDS, names.GPU_BUSY_RATIO: "gpu_busy"}
"""Each series the reader takes a pod's signal from, and the signal."""

Values = dict[str, float]


def exporter_text(values: Values) -> str:
    """A pod's exporter answer with `values` by series, its collections 2 s old."""
    lines = [f'{name}{{gpu="0"}} {value!r}' if name == names.GPU_BUSY_RATIO else f"{name} {value!r}"
             for name, value in values.items()]
    lines += [f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="{collector}"}} {NOW - 2}'
              for collector in (names.COLLECTOR_MODELMESH, names.COLLECTOR_GPU)]
    return "\n".join(lines) + "\n"


def desired(texts: list[str]) -> float | None:
    pods = tuple(parse_exporter_text(text, f"pod-{i}", True, NOW) for i, text in enumerate(texts))
    snapshot = RuntimeSnapshot(key=KEY, pods=pods, taken_at=NOW, source_ok=True, replicas=len(pods))
    view, _ = decide(snapshot, POLICY, None, NOW, 30.0)
    return view.values[ServedMetric.DESIRED_REPLICAS].value


plausible_pod = st.fixed_dictionaries({
    names.REQUESTS_PER_SECOND: st.floats(0, 200), names.QUEUE_DELAY_SECONDS: st.floats(0, 2),
    names.CACHE_MISSES_PER_SECOND: st.floats(0, 5), names.LRU_AGE_SECONDS: st.floats(0, 3600),
    names.CACHE_USED_RATIO: st.floats(0, 1), names.MODELS_LOADED: st.floats(0, 50),
    names.GPU_BUSY_RATIO: st.floats(0, 1),
})


@st.composite
def garbage(draw: st.DrawFn) -> tuple[str, float]:
    """A series, and a finite value above its signal's ceiling."""
    series = draw(st.sampled_from(sorted(FIELDS)))
    ceiling = CEILINGS[FIELDS[series]].limit
    return series, draw(st.floats(min_value=ceiling, max_value=1.7e308, exclude_min=True)
                        | st.sampled_from([ceiling * 1.5, 1e308]))


@PROPERTIES
@given(others=st.lists(plausible_pod, min_size=1, max_size=4), bad=garbage())
def test_one_pods_garbage_never_raises_desired_above_what_the_others_imply(
        others: list[Values], bad: tuple[str, float]) -> None:
    series, value = bad
    busiest = {name: max(pod[name] for pod in others) for name in others[0]}
    with_garbage = desired([exporter_text({**busiest, series: value}), *map(exporter_text, others)])
    as_the_busiest = desired([exporter_text(busiest), *map(exporter_text, others)])
    assert as_the_busiest is not None
    assert with_garbage is None or with_garbage <= as_the_busiest, (with_garbage, as_the_busiest)


def test_the_reviewed_case_keeps_the_runtime_where_its_pods_put_it() -> None:
    """4 pods at 10 requests a second for 20 a pod, half busy: 3 replicas (4 x 0.5 / 0.8 for the GPU); one pod's
    1e308 made it 1,000,000."""
    pod = {names.REQUESTS_PER_SECOND: 10.0, names.QUEUE_DELAY_SECONDS: 0.01, names.GPU_BUSY_RATIO: 0.5,
           names.CACHE_USED_RATIO: 0.5}
    assert desired([exporter_text(pod)] * 4) == 3.0
    assert desired([exporter_text({**pod, names.REQUESTS_PER_SECOND: 1e308}), *[exporter_text(pod)] * 3]) == 3.0
