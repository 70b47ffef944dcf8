"""The fast reader of the exporter's text reads what `prometheus_client`'s parser reads, or gives up.

Hypothesis writes exposition texts from the exporter's own series (labels, NaN and infinities, timestamps,
counters with `_total`/`_created`, comments) mixed with shapes the fast reader does not know (escapes, odd
spacing, other spellings of numbers, stray comments, garbage): wherever the fast reader answers, its samples
equal the library's; wherever the library fails, the fast reader has given up.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.sources.exporter_text import Sample, fast_samples, wanted
from autoscaler.sources.exposition import library_samples, parse_exporter_text
from exporter import names

NAMES = [names.GPU_BUSY_RATIO, names.REQUESTS_PER_SECOND, names.QUEUE_DELAY_SECONDS, names.LRU_AGE_SECONDS,
         names.CACHE_USED_RATIO, names.MODELS_LOADED, names.LAST_SUCCESS_TIMESTAMP, names.COLLECTOR_SUCCESS,
         names.EXPORTER_TIME, names.CACHE_CAPACITY_BYTES, names.REQUESTS_TOTAL, "modelmesh_pod_requests_created",
         "other_metric"]
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10**6, 10**12).map(str),
    st.sampled_from(["NaN", "+Inf", "-Inf", "Inf", "1e3", ".5", "5.", "-0", "1_000", "inf", "nan", "0x10", "1e",
                     "", "--1", "1.2.3"]),
)
LABEL_VALUES = st.one_of(st.sampled_from(["modelmesh", "gpu", "0", "GPU-1", ""]),
                         st.text(alphabet='ab"\\\n ,=}{', max_size=6))


@st.composite
def sample_line(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(NAMES))
    labels = draw(st.lists(st.tuples(st.sampled_from(["collector", "gpu", "uuid", "9bad"]), LABEL_VALUES),
                           max_size=3))
    label_text = ",".join(f'{key}="{value}"' for key, value in labels)
    braces = draw(st.sampled_from(["{%s}", "{%s,}", "%s", "{ %s }", "{%s"]))
    head = name + (braces % label_text if (labels or ("{" in braces and draw(st.booleans()))) else "")
    separator = draw(st.sampled_from([" ", " ", " ", "  ", "\t"]))
    line = head + separator + draw(NUMBERS)
    if draw(st.booleans()):
        line += draw(st.sampled_from([" 1700000000000", " -5", " x", ""]))
    return line + draw(st.sampled_from(["", "", "", " ", "\r"]))


COMMENTS = st.sampled_from([
    f"# HELP {names.GPU_BUSY_RATIO} Fraction of time a kernel ran.", f"# TYPE {names.GPU_BUSY_RATIO} gauge",
    f"# TYPE {names.REQUESTS_TOTAL.removesuffix('_total')} counter", "# TYPE x summary", "# TYPE x bogus",
    "# HELP x with \\n escape", "# a plain comment", "#", "# HELP", "# TYPE x", "", "garbage line",
])
TEXTS = st.lists(st.one_of(sample_line(), COMMENTS), max_size=12).map(lambda lines: "\n".join(lines) + "\n")


def same(left: list[Sample], right: list[Sample]) -> bool:
    if len(left) != len(right):
        return False
    for (name_a, labels_a, value_a), (name_b, labels_b, value_b) in zip(left, right, strict=True):
        if name_a != name_b or (name_a == names.LAST_SUCCESS_TIMESTAMP and labels_a != labels_b):
            return False
        if not (value_a == value_b or (math.isnan(value_a) and math.isnan(value_b))):
            return False
    return True


@settings(max_examples=500, deadline=None)
@given(TEXTS)
def test_the_fast_reader_agrees_with_the_library_or_gives_up(text: str) -> None:
    fast = fast_samples(text)
    try:
        library = wanted(library_samples(text))
    except Exception:  # the library's own errors vary (ValueError, IndexError, ...): all unreadable
        assert fast is None, text
        return
    if fast is not None:
        assert same(fast, library), text


def test_the_exporters_own_output_takes_the_fast_path() -> None:
    from bench.bench_fleet import STAMP, exporter_template

    text = STAMP.join(exporter_template(3)).decode()
    fast = fast_samples(text)
    assert fast is not None
    assert same(fast, wanted(library_samples(text)))
    sample = parse_exporter_text(text, "pod-3", True, 1234567891.0)  # scraped when its clock read the stamp
    assert (sample.gpu_busy, sample.requests_per_second, sample.sampled_at) == (0.3, 3.0, 1234567890.5)
