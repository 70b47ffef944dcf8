"""The fast reader of the exporter's text reads what `prometheus_client`'s parser reads, or gives up.

Hypothesis writes exposition texts from the exporter's own series (labels, NaN and infinities, timestamps,
counters with `_total`/`_created`, comments, runs of per-model lines whose ids hold the format's escapes and any
unicode) mixed with shapes the fast reader does not know (other escapes, odd
spacing, other spellings of numbers, stray comments, garbage): wherever the fast reader answers, its samples
equal the library's; wherever the library fails, the fast reader has given up.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from autoscaler.sources import exporter_text
from autoscaler.sources.exporter_text import LABELLED, Sample, fast_samples, wanted
from autoscaler.sources.exposition import library_samples, read_exporter_text
from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.pod_identity import POD_INFO_HELP
from tests.support.exporter_texts import parse_exporter_text

NAMES = [names.GPU_BUSY_RATIO, names.REQUESTS_PER_SECOND, names.QUEUE_DELAY_SECONDS, names.LRU_AGE_SECONDS,
         names.CACHE_USED_RATIO, names.MODELS_LOADED, names.LAST_SUCCESS_TIMESTAMP, names.COLLECTOR_SUCCESS,
         names.EXPORTER_TIME, names.CACHE_CAPACITY_BYTES, names.REQUESTS_TOTAL, "modelmesh_pod_requests_created",
         names.MODEL_LAST_SERVED_TIMESTAMP, names.POD_INFO, "other_metric"]
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10**6, 10**12).map(str),
    st.sampled_from(["NaN", "+Inf", "-Inf", "Inf", "1e3", ".5", "5.", "-0", "1_000", "inf", "nan", "0x10", "1e",
                     "", "--1", "1.2.3"]),
)


def escaped(text: str) -> str:
    """A label value as the exposition format writes it (prometheus_client's escaping)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


LABEL_VALUES = st.one_of(st.sampled_from(["modelmesh", "gpu", "0", "GPU-1", "", "mnist-svm__isvc-6b2eb0b8bf"]),
                         st.text(alphabet='abn"\\\n ,=}{é', max_size=6),
                         st.text(max_size=8).map(escaped))


# The strategies `sample_line` draws from are built once, here: built inside it, each was built and validated
# again for every line of every example.
SAMPLE_NAMES = st.sampled_from(NAMES)
LABEL_LISTS = st.lists(
    st.tuples(st.sampled_from(["collector", "gpu", "uuid", names.MODEL_ID_LABEL, *names.POD_LABELS, "9bad"]),
              LABEL_VALUES),
    max_size=3)
BRACES = st.sampled_from(["{%s}", "{%s,}", "%s", "{ %s }", "{%s"])
SEPARATORS = st.sampled_from([" ", " ", " ", "  ", "\t"])
SUFFIXES = st.sampled_from([" 1700000000000", " -5", " x", ""])
ENDINGS = st.sampled_from(["", "", "", " ", "\r"])


@st.composite
def sample_line(draw: st.DrawFn) -> str:
    name = draw(SAMPLE_NAMES)
    labels = draw(LABEL_LISTS)
    label_text = ",".join(f'{key}="{value}"' for key, value in labels)
    braces = draw(BRACES)
    head = name + (braces % label_text if (labels or ("{" in braces and draw(st.booleans()))) else "")
    separator = draw(SEPARATORS)
    line = head + separator + draw(NUMBERS)
    if draw(st.booleans()):
        line += draw(SUFFIXES)
    return line + draw(ENDINGS)


COMMENTS = st.sampled_from([
    f"# HELP {names.GPU_BUSY_RATIO} Fraction of time a kernel ran.", f"# TYPE {names.GPU_BUSY_RATIO} gauge",
    f"# TYPE {names.REQUESTS_TOTAL.removesuffix('_total')} counter", "# TYPE x summary", "# TYPE x bogus",
    "# HELP x with \\n escape", "# a plain comment", "#", "# HELP", "# TYPE x", "", "garbage line",
    f"# HELP {names.MODEL_LAST_SERVED_TIMESTAMP} Last served.", f"# TYPE {names.MODEL_LAST_SERVED_TIMESTAMP} gauge",
    f"# TYPE {names.MODEL_LAST_SERVED_TIMESTAMP} counter", f"# TYPE {names.MODEL_LAST_SERVED_TIMESTAMP} histogram",
    f"# TYPE {names.REQUESTS_PER_SECOND} counter", f"# TYPE {names.POD_INFO} gauge", f"# TYPE {names.POD_INFO} info",
])
MODEL_LINES = st.builds(lambda model, value, stamp: f'{names.MODEL_LAST_SERVED_TIMESTAMP}{{model_id="{model}"}} {value}'
                        f'{stamp}', LABEL_VALUES, NUMBERS, st.sampled_from(["", "", " 1700000000000", " -5"]))
"""Lines of the per-model series in the exporter's own shape (mostly), several in a row as it writes them."""
POD_FAMILIES = st.builds(
    lambda help_text, namespace, pod, uid, value: f"# HELP {names.POD_INFO} {help_text}\n"
    f'# TYPE {names.POD_INFO} gauge\n{names.POD_INFO}{{namespace="{namespace}",pod="{pod}",uid="{uid}"}} {value}',
    st.sampled_from([POD_INFO_HELP, POD_INFO_HELP, "Other words.", "with \\ backslash"]), *[st.one_of(
        st.from_regex(r"[a-z0-9.-]{0,12}", fullmatch=True), LABEL_VALUES)] * 3, NUMBERS)
"""The family naming the pod in the exporter's own shape (mostly), which the reader cuts out where it comes last."""
ERROR_LINES = st.builds(
    lambda collector, reason, value:
    f'{names.SCRAPE_ERRORS_TOTAL}{{collector="{collector}",reason="{reason}"}} {value}',
    st.sampled_from(["modelmesh", "gpu", "", "GPU", "a\\\\b"]),
    st.sampled_from(["connect", "tls", "not_found", "", 'x"y']), st.one_of(st.sampled_from(["0.0", "12.0"]), NUMBERS))
ERRORS_FAMILIES = st.builds(
    lambda help_text, kind, lines: f"# HELP {names.SCRAPE_ERRORS_TOTAL} {help_text}\n"
    f"# TYPE {names.SCRAPE_ERRORS_TOTAL} {kind}\n" + "\n".join(lines),
    st.sampled_from([names.SCRAPE_ERRORS_HELP, names.SCRAPE_ERRORS_HELP, "Other words."]),
    st.sampled_from(["counter", "counter", "gauge"]), st.lists(ERROR_LINES, max_size=4))
"""The exporter's failed reads by collector and reason in its own shape (mostly), which the reader cuts out whole."""
TEXTS = st.lists(st.one_of(sample_line(), COMMENTS, st.lists(MODEL_LINES, min_size=1, max_size=4).map("\n".join),
                           POD_FAMILIES, ERRORS_FAMILIES),
                 max_size=12).map(lambda lines: "\n".join(lines) + "\n")


def same(left: list[Sample], right: list[Sample]) -> bool:
    """The same samples, in the same order per series name (the reader keeps the last of a repeated series; the
    order across names does not matter to it)."""
    if len(left) != len(right):
        return False
    left, right = sorted(left, key=lambda sample: sample[0]), sorted(right, key=lambda sample: sample[0])
    for (name_a, labels_a, value_a), (name_b, labels_b, value_b) in zip(left, right, strict=True):
        if name_a != name_b or (name_a in LABELLED and labels_a != labels_b):
            return False
        if not (value_a == value_b or (math.isnan(value_a) and math.isnan(value_b))):
            return False
    return True


def assert_agrees_with_the_library_or_gives_up(text: str) -> None:
    """The fast reader reads `text` as prometheus_client does, or gives up (None); it gives up on what the library
    cannot read."""
    fast = fast_samples(text)
    try:
        library = wanted(library_samples(text))
    except Exception:  # the library's own errors vary (ValueError, IndexError, ...): all unreadable
        assert fast is None, text
        return
    if fast is not None:
        assert same(fast, library), text


@settings(max_examples=500, deadline=None)
@given(TEXTS)
def test_the_fast_reader_agrees_with_the_library_or_gives_up(text: str) -> None:
    assert_agrees_with_the_library_or_gives_up(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(sample_line(), COMMENTS), max_size=3), POD_FAMILIES)
def test_a_text_ending_in_the_pod_family_reads_as_the_library_reads_it(before: list[str], family: str) -> None:
    """The exporter's output (naming no pod), a few lines of any shape, then the family naming the pod, where the
    exporter writes it: the reader cuts it out there when it is in the exporter's own shape."""
    from bench.bench_exporter_text import with_models

    assert_agrees_with_the_library_or_gives_up(with_models(3, None, names_pod=False) + "\n".join([*before, family])
                                               + "\n")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(sample_line(), COMMENTS), max_size=3), ERRORS_FAMILIES,
       st.lists(st.one_of(sample_line(), COMMENTS), max_size=3))
def test_a_text_with_the_failure_counts_reads_as_the_library_reads_it(before: list[str], family: str,
                                                                    after: list[str]) -> None:
    """The exporter's output, a few lines of any shape, its failure counts by collector and reason, a few lines
    more: the reader cuts the family out where it is in the exporter's own shape, and reads the rest as ever."""
    from bench.bench_exporter_text import with_models

    own = [line for line in with_models(3, None).splitlines() if names.SCRAPE_ERRORS_TOTAL not in line]  # its own
    assert_agrees_with_the_library_or_gives_up("\n".join([*own, *before, family, *after]) + "\n")


def test_the_exporters_failure_counts_are_in_the_shape_the_reader_cuts_out() -> None:
    """The real collector's family, at 0 and counted: were its words to drift from what the reader looks for, every
    read would check its ten lines the general way, 47% more instructions (`bench/bench_exporter_text.py`)."""
    health = CollectorHealth()
    for collector in names.COLLECTOR_REASONS:
        health.register(collector)
    health.failed(names.COLLECTOR_MODELMESH, names.REASON_HTTP, "ModelMesh answered 503")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(health)
    text = f"# HELP {names.EXPORTER_TIME} clock\n" + generate_latest(registry).decode()

    assert names.SCRAPE_ERRORS_TOTAL in text
    assert names.SCRAPE_ERRORS_TOTAL not in exporter_text._without_errors_family(text)


def test_the_exporters_own_output_takes_the_fast_path() -> None:
    from bench.bench_fleet import STAMP, exporter_template

    text = STAMP.join(exporter_template(3)).decode()
    fast = fast_samples(text)
    assert fast is not None
    assert same(fast, wanted(library_samples(text)))
    sample = parse_exporter_text(text, "pod-3", True, 1234567891.0)  # scraped when its clock read the stamp
    assert (sample.gpu_busy, sample.requests_per_second, sample.sampled_at) == (0.3, 3.0, 1234567890.5)


def test_the_pod_an_exporter_names_is_read_from_its_own_output() -> None:
    """The family naming the pod, which a sidecar of the example patch writes last, read apart from the rest."""
    from bench.bench_exporter_text import with_models
    from bench.fake_exporter import bench_pod

    for models in (None, {"isvc-1": 1234567800.0}):
        text = with_models(3, models)
        assert exporter_text.pod_family(text) is not None, text  # read apart, not the general way
        fast = fast_samples(text)
        assert fast is not None and same(fast, wanted(library_samples(text)))
        assert read_exporter_text(text, "pod-3", True, 1234567891.0).pod == bench_pod(3)


def test_an_exporter_serving_a_hundred_models_takes_the_fast_path() -> None:
    from bench.bench_exporter_text import with_models

    ids = [f"model-{number}" for number in range(97)] + ['quoted "id"', "back\\slash", "line\nbreak", "modèle-ü"]
    text = with_models(3, dict.fromkeys(ids, 1234567800.0))
    fast = fast_samples(text)
    assert fast is not None
    assert same(fast, wanted(library_samples(text)))
    sample = parse_exporter_text(text, "pod-3", True, 1234567891.0)
    assert sample.recent_models == dict.fromkeys(ids, 1234567800.0)


PLAIN_IDS = st.one_of(st.sampled_from(["mnist-svm__isvc-6b2eb0b8bf", "isvc-0001__isvc-0000007919", ""]),
                      st.text(alphabet='ab"\\\n }{é#', max_size=6))
PLAIN_NUMBERS = st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr), st.integers(0, 10**12).map(str),
                          NUMBERS, st.text(alphabet="-+.0123456789eE", min_size=1, max_size=6))
"""Values of the plain run's characters, numbers and not (`1e`, `.`, `+-`), besides every other shape."""
PLAIN_RUNS = st.builds(
    lambda models, tail: "".join(f'\n{names.MODEL_LAST_SERVED_TIMESTAMP}{{model_id="{model}"}} {value}{stamp}'
                                 for model, value, stamp in models) + tail,
    st.lists(st.tuples(PLAIN_IDS, PLAIN_NUMBERS, st.sampled_from(["", "", "", " 1700000000000"])),
             min_size=1, max_size=3),
    st.sampled_from(["\n# HELP x y\n"] * 4 + ["\n#\n", "\nx 1\n# HELP x y\n", "\n\n# TYPE x gauge\n", "\n", "", "\n#"]))
"""Runs of per-model lines as `fast_samples` finds them (from a line's start), mostly in the exporter's plain
shape (ids without escapes, plain numbers, the next family's comment after them), with the odd line or
character that makes them another run."""


@settings(max_examples=500, deadline=None)
@given(PLAIN_RUNS)
def test_the_plain_run_reads_what_the_general_run_reads(text: str) -> None:
    """Where the plain run's reader answers, `_MODEL_RUN` and `_run_samples` read the same run and samples."""
    plain = exporter_text._plain_run(text, 0)
    if plain is None:
        return
    run = exporter_text._MODEL_RUN.match(text, 0)
    assert run is not None, text
    end, ids, values = plain
    name, label = names.MODEL_LAST_SERVED_TIMESTAMP, names.MODEL_ID_LABEL
    plain_samples = [(name, {label: model}, value) for model, value in zip(ids, values, strict=True)]
    assert (run.end(), list(exporter_text._run_samples(run[0]))) == (end, plain_samples), text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(sample_line(), COMMENTS), max_size=4), PLAIN_RUNS,
       st.lists(st.one_of(sample_line(), COMMENTS), max_size=4))
def test_a_text_with_a_plain_run_reads_as_the_library_reads_it(before: list[str], run: str, after: list[str]) -> None:
    assert_agrees_with_the_library_or_gives_up("\n".join(before) + run + "\n".join(after) + "\n")


def test_the_exporters_model_lines_are_a_plain_run() -> None:
    from bench.bench_exporter_text import model_ids, with_models

    text = with_models(3, model_ids(100))
    start = text.find(f"\n{names.MODEL_LAST_SERVED_TIMESTAMP}{{")
    plain = exporter_text._plain_run(text, start)
    assert plain is not None
    assert plain[1:] == (list(model_ids(100)), list(model_ids(100).values()))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="#\nab", max_size=12), PLAIN_RUNS)
def test_the_end_of_a_run_is_the_next_comment_line(head: str, run: str) -> None:
    """`_comment_after` finds what `str.find` of a newline and `#` finds after a run's first newline."""
    text = head + run
    start = len(head)
    assert exporter_text._comment_after(text, start) == text.find("\n#", start + 1), text
