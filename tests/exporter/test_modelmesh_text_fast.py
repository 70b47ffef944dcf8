"""The exporter's narrow reader of ModelMesh's text reads what `prometheus_client`'s parser reads, or gives up.

Hypothesis writes ModelMesh-like bodies: the real container's text (`modelmesh_wire`: per-model labels in its
order, its escaping, Java's doubles, filtered by the exporter's `name[]` or not), model ids with quotes,
backslashes, newlines and any unicode, then mutated (lines dropped, repeated, swapped, cut at a random byte),
and bodies of loose lines mixing those shapes with ones the narrow reader does not know (other escapes, odd
spacing, timestamps, exemplars, stray comments, counters' `# TYPE`, `NaN`, infinities, negative and exponent
values, other spellings of numbers, garbage). `parse_modelmesh` (the narrow reader, the library where it gives up)
and `parse_with_library` (the library alone, the path before the narrow reader) must agree on every body: the
same reading, series in the same order, or the same failure.
"""

from __future__ import annotations

import itertools
import unittest.mock
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import body_pieces, modelmesh_fast, names
from exporter.body_pieces import BodyPieces
from exporter.modelmesh_text import (
    COUNTER_FIELDS,
    REQUESTS,
    SAMPLES_READ,
    ModelMeshReading,
    ScrapeFailure,
    parse_modelmesh,
    parse_narrowly,
    parse_with_library,
)
from tests.exporter.modelmesh_wire import ModelMeshContainer, escape_label_value, java_double

WALL = 1_800_000_000.0
Outcome = tuple[Any, ...]


def outcome(read: Any, text: str | Sequence[str]) -> Outcome:
    """What a read of `text` comes to: the reading (values by `repr`, so that -0.0 is not 0.0; series in their
    order), or the failure (its type, reason and message)."""
    try:
        reading: ModelMeshReading | None = read(text)
    except ScrapeFailure as failure:
        return ("failure", failure.reason, str(failure))
    except Exception as error:  # today's read lets some through: an integer too large for a float
        return ("error", type(error), str(error))
    if reading is None:  # parse_narrowly gave up
        return ("gave up",)
    return ("reading",
            tuple((field, tuple((key, repr(value)) for key, value in reading.counters[field].items()))
                  for field in COUNTER_FIELDS),
            tuple(repr(value) for value in (reading.lru_age_s, reading.capacity_bytes, reading.used_bytes,
                                            reading.models_loaded, reading.lru_time_s)))


def assert_same(text: str) -> Outcome:
    new = outcome(parse_modelmesh, text)
    assert new == outcome(parse_with_library, text), text
    return new


# ---- the real container's text, mutated ----

MODEL_IDS = st.one_of(
    st.builds(lambda n: f"model-{n:05d}__isvc-{n * 7919 % 10**10:010d}", st.integers(0, 99_999)),
    st.text(max_size=12),
    st.text(alphabet='ab"\\\n\r{},=# é\u2028\x85', max_size=8),
)
VALUES = st.one_of(st.integers(0, 10**6).map(float), st.floats(0, 1e12), st.sampled_from([0.0, 1e7, 1e-7, 2.5e15]))
# The strategies a drawing function uses are built once, here: a strategy built inside a draw is built and
# validated again for every example, which was most of what this file's 2,500 examples cost.
METHODS = st.sampled_from(["ModelInfer", "ModelMetadata"])
CODES = st.sampled_from(["OK", "NOT_FOUND"])
VMODELS = st.sampled_from(["", "vm", 'v"m'])
LRU_TIMES = st.one_of(st.none(), st.floats(WALL - 1e6, WALL + 100))  # ahead: a negative age
CAPACITIES = st.sampled_from([16.0 * 2**30, 0.0, 1.0])
MUTATIONS = st.sampled_from(["drop", "repeat", "swap", "keep"])


@st.composite
def container_text(draw: st.DrawFn) -> str:
    """A per-model (or not) ModelMesh's `/metrics` after some requests, as the exporter asks for it or whole."""
    container = ModelMeshContainer(lambda: WALL, per_model=draw(st.booleans()))
    for model in draw(st.lists(MODEL_IDS, max_size=5)):
        container.serve(draw(VALUES), model=model, method=draw(METHODS), code=draw(CODES), latency_ms=draw(VALUES),
                        vmodel=draw(VMODELS))
    if draw(st.booleans()):
        lru_time = draw(LRU_TIMES)
        container.publish(models=draw(st.integers(0, 5)), lru_time_s=lru_time, capacity_bytes=draw(CAPACITIES))
    return container.render(frozenset(SAMPLES_READ) if draw(st.booleans()) else frozenset())


@st.composite
def mutated(draw: st.DrawFn, texts: st.SearchStrategy[str]) -> str:
    """`texts` with lines dropped, repeated or swapped, or cut at a random byte (decoded as the collector would,
    but replacing a cut character)."""
    lines = draw(texts).split("\n")[:-1]
    for _ in range(draw(st.integers(0, 3))):
        if not lines:
            break
        index = draw(st.integers(0, len(lines) - 1))
        action = draw(MUTATIONS)
        if action == "drop":
            del lines[index]
        elif action == "repeat":
            lines.insert(draw(st.integers(0, len(lines))), lines[index])
        elif action == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
    text = "".join(line + "\n" for line in lines)
    if draw(st.booleans()):
        data = text.encode()
        text = data[:draw(st.integers(0, len(data)))].decode("utf-8", "replace")
    return text


@settings(max_examples=300, deadline=None)
@given(container_text())
def test_the_real_containers_text_takes_the_narrow_path(text: str) -> None:
    assert parse_narrowly(text) is not None, text
    assert_same(text)


@settings(max_examples=400, deadline=None)
@given(mutated(container_text()))
def test_the_narrow_reader_agrees_with_the_library_on_mutated_modelmesh_text(text: str) -> None:
    assert_same(text)


@settings(max_examples=300, deadline=None)
@given(st.one_of(container_text(), mutated(container_text())), st.integers(1, 400))
def test_the_readers_read_the_same_however_the_text_is_cut_into_pieces(text: str, piece: int) -> None:
    """Both readers read a large body a piece at a time (`SCAN_CHARS`, so Python's lock passes between pieces):
    every cut, at a line's newline, inside a label or a number, must read as the whole text does. The bodies here
    are smaller than a piece, so the pieces are made smaller than the lines."""
    reads = (parse_modelmesh, parse_narrowly, parse_with_library)
    whole = [outcome(read, text) for read in reads]
    with unittest.mock.patch.object(modelmesh_fast, "SCAN_CHARS", piece):
        assert [outcome(read, text) for read in reads] == whole, text


@settings(max_examples=300, deadline=None)
@given(st.one_of(container_text(), mutated(container_text())), st.integers(1, 400),
       st.lists(st.integers(1, 300), min_size=1, max_size=20))
def test_a_body_decoded_as_it_arrives_reads_as_the_whole_text(text: str, piece: int, chunks: list[int]) -> None:
    """The exporter decodes ModelMesh's answer as its bytes arrive, into pieces of whole lines, so that it never
    holds the bytes and the text at once (`exporter.body_pieces`): whatever chunks the bytes come in (a
    character's bytes split between two too) and however short the pieces, the pieces joined are the text, each
    but the last ends with a newline, and every reader reads them as it reads the whole text."""
    data = text.encode()
    with unittest.mock.patch.object(body_pieces, "PIECE_CHARS", piece):
        body = BodyPieces("utf-8")
        start, sizes = 0, itertools.cycle(chunks)
        while start < len(data):
            end = start + next(sizes)
            body.add(data[start:end])
            start = end
        pieces = body.end()
    assert "".join(pieces) == text
    assert all(part.endswith("\n") for part in pieces[:-1])
    reads = (parse_modelmesh, parse_narrowly, parse_with_library)
    assert [outcome(read, pieces) for read in reads] == [outcome(read, text) for read in reads], text


def test_a_body_not_in_its_encoding_fails_as_decoding_it_whole_does() -> None:
    for data in (b"# HELP a b\n\xff\n", b"# HELP a \xc3"):  # a byte UTF-8 never has; a character cut off
        with pytest.raises(UnicodeDecodeError):
            data.decode("utf-8")
        body = BodyPieces("utf-8")
        with pytest.raises(UnicodeDecodeError):
            body.add(data)
            body.end()


# ---- loose lines, in shapes ModelMesh writes and others ----

SAMPLE_NAMES = st.sampled_from([
    *SAMPLES_READ, f"{names.MM_INVOKE_MODEL_MS}_bucket", f"{names.MM_INVOKE_MODEL_MS}_sum", names.MM_INVOKE_MODEL_MS,
    "modelmesh_instance_used_bps", "modelmesh_instance_models", f"{names.MM_LRU_AGE_S}_total", "other_metric",
])
NUMBERS = st.one_of(
    st.floats(0, allow_infinity=False).map(java_double),
    st.floats(0, allow_infinity=False).map(java_double),
    st.integers(0, 10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(java_double),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10**6, 10**12).map(str),
    st.sampled_from(["NaN", "+Inf", "-Inf", "Inf", "inf", "nan", "-0", "-00", "+0", "-0.0", "-0e3", "1e3", "1E-5",
                     ".5", "5.", "-20.0", "1e400", "-1e400", "1" + "0" * 400, "-" + "9" * 400, "-1" + "0" * 400,
                     "1_000", "0x10", "1e", "", "--1", "1.2.3", "\u0663", " 5", "5 "]),
)
LABEL_NAMES = st.sampled_from(["method", "code", names.MM_MODEL_ID_LABEL, "vModelId"] * 3
                              + ["le", "_x", "__name__", "__x", "9bad", "a:b"])
LABEL_VALUES = st.one_of(
    st.sampled_from(["ModelInfer", "OK", "", "model-0__isvc-0000007919"]),
    st.text(max_size=8).map(escape_label_value),
    st.text(alphabet='ab"\\\n\r{}=,# \tnxé\u2028\x85', max_size=6).map(escape_label_value),
    st.text(alphabet='ab"\\\n\r{}=,# \tnxé', max_size=6),  # raw: unescaped quotes, other escapes, a line's end
)


LABEL_LISTS = st.lists(st.tuples(LABEL_NAMES, LABEL_VALUES), max_size=4)
BRACES = st.sampled_from(["{%s}"] * 6 + ["{ %s }", "{,%s}", "{%s", "%s"])
SEPARATORS = st.sampled_from([" "] * 6 + ["  ", "\t", ""])
SUFFIXES = st.sampled_from([""] * 8 + [" 1700000000000", " -5", ' # {trace_id="a"} 1', " ", "\r", "\t", " x"])


@st.composite
def sample_line(draw: st.DrawFn) -> str:
    labels = [f'{name}="{value}"' for name, value in draw(LABEL_LISTS)]
    trailing_comma = draw(st.booleans())
    label_text = "".join(f"{label}," for label in labels) if trailing_comma else ",".join(labels)
    braces = draw(BRACES)
    with_braces = bool(labels) or draw(st.booleans())
    head: str = draw(SAMPLE_NAMES) + (braces % label_text if with_braces else "")
    separator = draw(SEPARATORS)
    suffix = draw(SUFFIXES)
    number: str = draw(NUMBERS)
    return head + separator + number + suffix


COMMENTS = st.sampled_from([
    *(f"# HELP {name} Some help." for name in (names.MM_INVOKE_MODEL_MS, names.MM_LRU_AGE_S, "other")),
    *(f"# TYPE {name} {kind}" for name in (names.MM_INVOKE_MODEL_MS, names.MM_QUEUE_DELAY_MS, names.MM_LRU_AGE_S,
                                          names.MM_MODELS_TOTAL, *SAMPLES_READ, "modelmesh_instance_models",
                                          "_total", "other_total")
      for kind in ("histogram", "gauge", "counter", "summary", "untyped")),
    f"# HELP {names.MM_MODELS_TOTAL}", f"# HELP {names.MM_MODELS_TOTAL} ", f"# HELP {names.MM_MODELS_TOTAL}\thelp",
    '# HELP x doc with "a quote', "# HELP x doc with \\n escape", '# HELP "quoted name" doc', "#HELP x",
    "# TYPE x bogus", "# TYPE x", "# TYPE", "# HELP", "#", "# a plain comment", f"# TYPE {names.MM_LRU_AGE_S} info",
    f"#  TYPE {names.MM_LRU_AGE_S} gauge", f"# TYPE {names.MM_LRU_AGE_S}  gauge", f"# TYPE {names.MM_LRU_AGE_S} gauge ",
    "", " ", "<html><body>502 Bad Gateway</body></html>", f"  {names.MM_MODELS_TOTAL} 3.0",
    'modelmesh_model_sizing_milliseconds{modelId="model-0"} not-a-number',
])
REQUIRED_GAUGES = [f"{names.MM_LRU_AGE_S} 10.0", f"{names.MM_CAPACITY_BYTES} 1.7179869184E10",
                   f"{names.MM_USED_BYTES} 8.0", f"{names.MM_MODELS_TOTAL} 2.0"]
GAUGE_NAMES = st.permutations([line.split(" ")[0] for line in REQUIRED_GAUGES])


@st.composite
def gauges_of_any_value(draw: st.DrawFn) -> list[str]:
    """Every instance gauge once, in any order, each with any number."""
    return [f"{gauge} {draw(NUMBERS)}" for gauge in draw(GAUGE_NAMES)]


GAUGES = st.one_of(st.just(REQUIRED_GAUGES), st.just(REQUIRED_GAUGES),
                   st.lists(st.sampled_from(REQUIRED_GAUGES), max_size=4), gauges_of_any_value())
"""The instance gauges, mostly all of them, so that a body is often a reading, not always a missing gauge."""
LOOSE_LINES = st.lists(st.one_of(sample_line(), sample_line(), COMMENTS), max_size=10)
ENDINGS = st.sampled_from(["\n", "\n", "\n", "", "\r\n"])


@st.composite
def loose_text(draw: st.DrawFn) -> str:
    lines = draw(LOOSE_LINES) + draw(GAUGES)
    return "\n".join(draw(st.permutations(lines))) + draw(ENDINGS)


@settings(max_examples=1500, deadline=None)
@given(st.one_of(loose_text(), mutated(loose_text())))
def test_the_narrow_reader_agrees_with_the_library_on_loose_lines(text: str) -> None:
    assert_same(text)


# ---- where the narrow reader gives up, the library reads: the same result ----

GOOD = (f"# HELP {names.MM_INVOKE_MODEL_MS} Internal model server inference request time\n"
        f"# TYPE {names.MM_INVOKE_MODEL_MS} histogram\n"
        f'{names.MM_INVOKE_MODEL_MS}_count{{method="ModelInfer",code="OK",modelId="m\\"1",vModelId="",}} 5.0\n'
        f"{names.MM_LRU_AGE_S} 10.0\n{names.MM_CAPACITY_BYTES} 1.7179869184E10\n{names.MM_USED_BYTES} 8.0\n"
        f"{names.MM_MODELS_TOTAL} 2.0\n")
COUNT_LINE = f'{names.MM_INVOKE_MODEL_MS}_count{{method="ModelInfer",code="OK",modelId="m\\"1",vModelId="",}} 5.0'


def test_modelmeshs_own_shapes_take_the_narrow_path() -> None:
    reading = parse_narrowly(GOOD)
    assert reading is not None
    assert list(reading.counters[REQUESTS]) == [
        (("code", "OK"), ("method", "ModelInfer"), ("modelId", 'm"1'), ("vModelId", ""))]
    assert assert_same(GOOD)[0] == "reading"
    negative_age = GOOD.replace(f"{names.MM_LRU_AGE_S} 10.0", f"{names.MM_LRU_AGE_S} -20.0")
    assert parse_narrowly(negative_age) is not None  # a pod holding only copies stamped ahead: read as just used
    assert parse_modelmesh(negative_age).lru_age_s == 0.0


@pytest.mark.parametrize("text", [
    pytest.param(GOOD.replace(COUNT_LINE, COUNT_LINE + " 1700000000000"), id="timestamp"),
    pytest.param(GOOD.replace(COUNT_LINE, COUNT_LINE + ' # {trace_id="a"} 1.0'), id="exemplar"),
    pytest.param(GOOD.replace("} 5.0", "}\t5.0"), id="tab"),
    pytest.param(GOOD.replace("} 5.0", "}  5.0"), id="two-spaces"),
    pytest.param(GOOD.replace("\n", "\r\n"), id="crlf"),
    pytest.param(GOOD.replace('m\\"1', "m\\t1"), id="unknown-escape"),
    pytest.param(GOOD.replace('code="OK",', 'code="OK",code="OK",'), id="repeated-label"),
    pytest.param(GOOD.replace("5.0", "5_0"), id="underscore"),
    pytest.param(GOOD.replace("# TYPE", "# a comment\n# TYPE"), id="plain-comment"),
    pytest.param(GOOD.replace(f"{names.MM_MODELS_TOTAL} 2.0", f"# TYPE {names.MM_MODELS_TOTAL} counter\n"
                              f"{names.MM_MODELS_TOTAL} 2.0"), id="counter-type"),
    pytest.param(GOOD.replace(f"{names.MM_USED_BYTES} 8.0", f'{names.MM_USED_BYTES}{{a="1"}} 8.0\n'
                              f'{names.MM_USED_BYTES}{{a="2"}} 9.0\n{names.MM_USED_BYTES}{{a="1"}} 7.0'),
                 id="labelled-gauges"),
    pytest.param(GOOD.replace("# TYPE", "# TYPE _total counter\n# TYPE"), id="nameless-counter"),
    pytest.param(GOOD.replace("5.0", "NaN"), id="nan-counter"),
    pytest.param(GOOD.replace("5.0", "-5"), id="negative-counter"),
    pytest.param(GOOD.replace("10.0", "-Inf"), id="negative-infinite-age"),
    pytest.param(GOOD.replace("10.0", "-1" + "0" * 400), id="huge-negative-age"),
])
def test_what_the_narrow_reader_does_not_know_is_read_by_the_library(text: str) -> None:
    assert parse_narrowly(text) is None
    assert_same(text)


def test_a_negative_integer_zero_reads_as_the_library_reads_it() -> None:
    """The library reads `-0` as the integer 0, `-0.0` as the float -0.0."""
    for number, expected in (("-0", "0.0"), ("-0.0", "-0.0")):
        text = GOOD.replace("} 5.0", "} " + number)
        reading = assert_same(text)
        assert reading[1][0][1][0][1] == expected
