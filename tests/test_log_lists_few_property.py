"""A list in a log line (`few`), however its items are parted: the first `named` items, in order, each whole,
then the count of the rest, which adds up to the list; never a cut item, never a count of nothing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.log_lists import few

SEPARATORS = st.sampled_from([(", ", " and {} more"), ("; ", "; and {} more"), ("; ", "; {} more"),
                              (", ", " and {} more runtimes")])


@given(st.integers(min_value=1, max_value=2000), st.integers(min_value=1, max_value=12), SEPARATORS)
def test_names_the_first_and_counts_the_rest(count: int, named: int, parts: tuple[str, str]) -> None:
    sep, more = parts
    items = [f"ns/pod-{index}: not scraped" for index in range(count)]
    line = few(items, named, sep=sep, more=more)
    left = count - min(count, named)
    tail = more.format(left) if left else ""
    assert line.endswith(tail)
    assert line[:len(line) - len(tail)].split(sep) == items[:named]


def test_an_empty_list_says_none() -> None:
    assert few([], sep="; ", more="; {} more") == "none"
