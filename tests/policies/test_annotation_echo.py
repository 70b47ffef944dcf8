"""What the log and /debug show of an annotation's value: whoever controls a Deployment writes it, so it may be
a 100 KB value (a tenant's controller rotating one every 30 s over many runtimes). It is shown once a line,
quoted, at most `ECHO_LIMIT` characters of it and how many it has: one bad 100 KB value made a 200 KB WARNING
line, the value once beside the annotation's name and again in why it was refused."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy_origins import policy_document, unknown_annotations
from autoscaler.policies.policy_values import ECHO_LIMIT
from tests.policies.builders import PROPERTIES
from tests.support.log_lines import LineCatcher

TRITON = RuntimeKey("default", "modelmesh-serving-triton")
PREFIX = "autoscaler.modelmesh.io/"
LOGGER = "autoscaler.policies.config"
LONGEST_LINE = 2_000
"""More than any line about the annotations of one key needs (/debug's entry for a key written in three
spellings; the log's line for a key of none, which lists every policy key), and far less than a value a tenant
may write."""


def _shown(book: PolicyBook, steps: list[dict[str, str]]) -> tuple[list[str], list[str]]:
    """The log lines of the refreshes that see the runtime's annotations as in `steps`, and /debug's texts
    (its policy and its unknown annotations) after the last."""
    handler = LineCatcher()
    logging.getLogger(LOGGER).addHandler(handler)
    try:
        for annotations in steps:
            book.policy_for(TRITON, annotations)
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)
    explained = book.explain(TRITON)
    debug = [json.dumps(entry) for entry in (policy_document(explained) or {}).values()]
    return handler.lines, debug + unknown_annotations(explained)


def test_a_100_kb_bad_value_is_shown_once_a_line_and_cut_short() -> None:
    value = "9" * 100_000 + "x"
    lines, debug = _shown(PolicyBook(), [{PREFIX + "target-rps-per-pod": value}])
    [line] = lines
    assert f"target-rps-per-pod={value[:ECHO_LIMIT]!r}... (100,001 characters): target_rps_per_pod must be a " \
           "number;" in line, line[:500]
    assert line.count(value[:ECHO_LIMIT]) == 1 and len(line) < LONGEST_LINE, line[:500]
    [ignored] = [entry for entry in debug if "ignored" in entry]
    assert ignored.count(value[:ECHO_LIMIT]) == 1 and "(100,001 characters)" in ignored, ignored[:500]


def test_a_long_last_good_value_is_cut_short_where_it_is_kept() -> None:
    """A value that parses (spaces around a number) may be long too; it is the one named to keep."""
    good = " " * 50_000 + "3"
    lines, debug = _shown(PolicyBook(), [{PREFIX + "min-replicas": good}, {PREFIX + "min-replicas": "3x"}])
    [line] = lines
    assert "keeps min_replicas 3" in line and "(50,001 characters)" in line and len(line) < LONGEST_LINE, line[:500]
    [entry] = [entry for entry in debug if "last good value" in entry]
    assert "(50,001 characters)" in entry and len(entry) < LONGEST_LINE, entry[:500]


_SPELLINGS = st.sampled_from([
    PREFIX + "target-rps-per-pod",  # documented
    PREFIX + "target_rps_per_pod",  # the file's spelling, read too
    PREFIX + "Target-Rps-Per-Pod",  # a near miss, ignored
    "autoscaling.modelmesh.io/min-replicas",  # a near miss under another prefix
    PREFIX + "target-rps",  # no such key, one likely meant
    PREFIX + "gpu-thing",  # no such key, none likely meant: every key listed
])


@PROPERTIES
@given(st.lists(st.tuples(_SPELLINGS, st.text(min_size=ECHO_LIMIT + 1, max_size=3 * ECHO_LIMIT)
                          | st.text(alphabet="0123456789 .", min_size=ECHO_LIMIT + 1, max_size=2_000)),
                min_size=1, max_size=3))
def test_no_line_shows_a_long_value_whole(written: list[tuple[str, str]]) -> None:
    """Whatever the spelling, and whether the value is refused, applied or kept as the last good one; escapes
    (a control character shown as `\\x07`) count in what is shown."""
    steps = [{PREFIX + "max-replicas": "8"}]
    steps += [{annotation: value, PREFIX + "max-replicas": "9"} for annotation, value in written]
    lines, debug = _shown(PolicyBook(), steps)
    for text in lines + debug:
        assert len(text) < LONGEST_LINE, text[:500]
        for _annotation, value in written:
            assert value[:ECHO_LIMIT + 1] not in text, text[:500]



OUT_OF_RANGE = [
    ("queue-drain-s", "1e300", "queue_drain_s must be > 0 and at most 3600 seconds"),
    ("queue-drain-s", "5000", "queue_drain_s must be > 0 and at most 3600 seconds"),
    ("min-replicas", "0", "min_replicas must be null or from 1 to 1,000,000 (the most the adapter serves)"),
    ("skew-order", "0.5", "skew_order must be >= 1"),
    ("target-gpu-busy", "80", "target_gpu_busy must be in (0, 1] (a ratio: write 0.8 for 80%)"),
]


@pytest.mark.parametrize(("name", "value", "rule"), OUT_OF_RANGE, ids=[f"{n}={v}" for n, v, _ in OUT_OF_RANGE])
def test_an_annotation_out_of_range_is_named_once_with_its_key_and_range(name: str, value: str, rule: str) -> None:
    """The warning read `queue-drain-s='1e300': queue_drain_s must be > 0 and at most 3600 seconds, got 1e+300`:
    the value twice, the second time spelt otherwise (`'5000'`, then `5000.0`), as if two values were written."""
    lines, debug = _shown(PolicyBook(), [{PREFIX + name: value}])
    [line] = lines
    assert f"ignoring annotation {PREFIX}{name}='{value}': {rule}; the runtime uses " in line, line
    assert "got" not in line, line
    [ignored] = [entry for entry in debug if "ignored" in entry]
    assert f"{PREFIX}{name}='{value}': {rule}" in json.loads(ignored)["ignored"] and "got" not in ignored, ignored
