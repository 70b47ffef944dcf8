"""What the adapter reads of a tenant's exporter answer is bounded, and within the bounds the fast reader still reads
what prometheus_client's parser reads.

The duplicate-label check was quadratic in a line's labels (a single 250 KB line held every runtime's refresh),
and any text the fast reader gave up on went whole to the library's parser, about a second of the event loop per
MiB. Properties here: a line over `MAX_LABELS_PER_LINE` labels is refused, saying so, in any shape; a line within
it, labels repeated or not, is read as the library reads it (the fast reader's check is bounded, not weakened); an
answer the fast reader gives up on is read by the library only up to `FALLBACK_MAX_BYTES`, else refused saying so.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.sources.exporter_text import fast_samples
from autoscaler.sources.exporter_text_limits import FALLBACK_MAX_BYTES, MAX_LABELS_PER_LINE
from autoscaler.sources.exposition import ExpositionError, read_exporter_text
from tests.sources.test_exporter_text import NAMES, assert_agrees_with_the_library_or_gives_up, escaped
from tests.support.exporter_texts import load_lines

NOW = 1_700_000_000.0
LABEL_NAMES = st.sampled_from(["a", "b", "collector", "gpu", "uuid", "model_id", "pod", "namespace", "uid", "l_9"])
LABEL_VALUES = st.one_of(st.sampled_from(["modelmesh", "0", "", "a=b"]), st.text(max_size=8).map(escaped)).filter(
    lambda value: not value.endswith("="))
"""Values as the format writes them (escaped): a label's `="` is the only one on its line, but for a value that
ends in `=` (counted as a label by the limit, which is the library's to read or refuse)."""
LABELS = st.lists(st.tuples(LABEL_NAMES, LABEL_VALUES), max_size=MAX_LABELS_PER_LINE + 4)
"""Up to a few labels more than the limit, names often repeated (the library refuses a line naming one twice)."""


def answer(name: str, labels: list[tuple[str, str]], escape: bool) -> str:
    """An exporter's load lines, then one line of `labels`; `escape` adds a line the fast reader gives up on."""
    label_text = ",".join(f'{key}="{value}"' for key, value in labels)
    return "\n".join([*load_lines(NOW), *(['x{a="\\t"} 1'] if escape else []), f"{name}{{{label_text}}} 1"]) + "\n"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(NAMES), LABELS, st.booleans())
def test_a_line_over_the_label_limit_is_refused_and_one_within_it_read_as_the_library_reads_it(
        name: str, labels: list[tuple[str, str]], escape: bool) -> None:
    text = answer(name, labels, escape)
    if len(labels) > MAX_LABELS_PER_LINE:
        assert fast_samples(text) is None
        with pytest.raises(ExpositionError, match=rf"has {len(labels)} labels, over the {MAX_LABELS_PER_LINE} a "
                                                  r"line .*MAX_LABELS_PER_LINE"):
            read_exporter_text(text, "p", True, NOW)
    else:
        assert_agrees_with_the_library_or_gives_up(text)


def test_the_most_labels_a_line_may_have_are_read_by_the_fast_reader() -> None:
    """The exporter's shape with `MAX_LABELS_PER_LINE` labels takes the fast path, so the limit is the reader's."""
    labels = [(f"l{number}", "v") for number in range(MAX_LABELS_PER_LINE)]
    assert fast_samples(answer("other_metric", labels, escape=False)) is not None
    repeated = [*labels[:-1], labels[0]]
    assert fast_samples(answer("other_metric", repeated, escape=False)) is None  # the library refuses it too


@settings(max_examples=50, deadline=None)
@given(st.integers(-2_000, 2_000))
def test_an_answer_not_in_the_exporters_shape_is_read_up_to_the_fallback_limit(overshoot: int) -> None:
    """Around the limit, to the byte: within it the library reads the answer; over it the answer is refused unread,
    saying how large it is and which limit applies."""
    head = answer("other_metric", [], escape=True)
    size = FALLBACK_MAX_BYTES + overshoot
    filler = "# " + "é" * ((size - len(head.encode()) - 3) // 2)  # two bytes a character: sized in bytes, not chars
    text = head + filler + "x" * (size - len((head + filler).encode()) - 1) + "\n"
    assert len(text.encode()) == size and fast_samples(text) is None
    if size <= FALLBACK_MAX_BYTES:
        assert read_exporter_text(text, "p", True, NOW).sample.requests_per_second == 10.0
    else:
        with pytest.raises(ExpositionError, match=rf"{size:,} bytes not in the exporter's own shape, over the 64 KiB"
                                                  r" .*FALLBACK_MAX_BYTES"):
            read_exporter_text(text, "p", True, NOW)
