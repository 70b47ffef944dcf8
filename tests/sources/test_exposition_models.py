"""A pod's reading is the same whether the fast reader hands over its run of model lines in whole or the library's
samples are read one at a time.

`read_exporter_text` takes the fast reader's usual run of per-model lines as two lists and makes the pod's models
of them in one step (`exposition._add_models`); the reference is the same function with the fast reader off
(every sample from `prometheus_client`, through the loop that keeps a model when its id is not empty and its time
valid, interned, the last time of a repeated id). Hypothesis writes the exporter's own text with runs of model
lines of every kind: repeated, empty and odd ids, negative, huge (`1e999`: infinite), `-0` and unreadable times,
timestamps, stray lines; read at the exporter's clock and at a clock far off (every time moved).
"""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.sources import exporter_text, exposition
from autoscaler.sources.exposition import ExporterReading, ExpositionError, read_exporter_text
from bench.bench_exporter_text import with_models
from exporter import names

PLACEHOLDER = f'{names.MODEL_LAST_SERVED_TIMESTAMP}{{model_id="placeholder"}} 1.0\n'
BASE = with_models(3, {"placeholder": 1.0})
EXPORTER_CLOCK = 1234567890.5
IDS = st.one_of(st.sampled_from(["isvc-0001__isvc-0000007919", "mnist-svm__isvc-6b2eb0b8bf", "", "a", "a"]),
                st.text(alphabet='ab"\\\n }{é#', max_size=5))
TIMES = st.one_of(st.sampled_from(["1234567800.0", "1.2345678e+09", "0", "-0", "-1", "1e999", "-1e999", "NaN",
                                   "+Inf", "1e", ".", "1234567899.0", "1234567890.5", "2e9"]),
                  st.floats(allow_nan=False).map(repr), st.integers(-5, 2 * 10**9).map(str))
MODEL_LINE = st.builds(lambda model, at, stamp: f'{names.MODEL_LAST_SERVED_TIMESTAMP}{{model_id="{model}"}} {at}'
                       f'{stamp}\n', IDS, TIMES, st.sampled_from(["", "", "", "", " 1700000000000"]))
RUNS = st.lists(st.one_of(MODEL_LINE, MODEL_LINE, MODEL_LINE, st.just("other_metric 1\n"), st.just("\n")),
                max_size=8).map("".join)


def library_reading(text: str, scraped_at: float) -> ExporterReading | str:
    """The reading with every sample from `prometheus_client`, one at a time (or the error's text)."""
    with mock.patch.object(exposition, "fast_read", return_value=None):
        return reading(text, scraped_at)


def reading(text: str, scraped_at: float) -> ExporterReading | str:
    try:
        return read_exporter_text(text, "pod-3", True, scraped_at)
    except ExpositionError as error:
        return f"ExpositionError: {error}"


def in_order(result: ExporterReading | str) -> object:
    """The reading with its models' order, which dict equality ignores."""
    if isinstance(result, str):
        return result
    models = result.sample.recent_models
    return result, None if models is None else list(models.items())


@settings(max_examples=600, deadline=None)
@given(RUNS, st.sampled_from([EXPORTER_CLOCK + 0.2, 2e9, 1234567800.0]))
def test_a_pods_models_read_in_whole_equal_the_library_read_one_at_a_time(run: str, scraped_at: float) -> None:
    text = BASE.replace(PLACEHOLDER, run)
    assert in_order(reading(text, scraped_at)) == in_order(library_reading(text, scraped_at)), text


def test_the_usual_run_is_read_in_whole() -> None:
    """The exporter's own 100 model lines take the fast reader's run (its ids and times apart), and read as the
    library reads them."""
    from bench.bench_exporter_text import model_ids

    text = with_models(3, model_ids(100))
    fast = exporter_text.fast_read(text)
    assert fast is not None and fast[1] == list(model_ids(100))
    assert in_order(reading(text, EXPORTER_CLOCK)) == in_order(library_reading(text, EXPORTER_CLOCK))
