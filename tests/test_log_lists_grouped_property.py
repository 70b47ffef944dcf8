"""A fleet's changes said together (`say_each_or_grouped`, as a sync's RuntimeScales and a refresh's runtimes are
said): every item is in exactly one line, and more than `NAMED` of them never make more lines than states."""

from __future__ import annotations

import logging

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.log_lists import NAMED, say_each_or_grouped

Item = tuple[str, str]  # a name, and the state it is now in

ITEMS = st.lists(st.sampled_from(["Ready", "NoDeployment", "Conflict"]), max_size=3 * NAMED).map(
    lambda states: [(f"ns/scale-{index}", state) for index, state in enumerate(states)])


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.said: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append((record.levelno, record.getMessage()))


def own(item: Item) -> str:
    return f"RuntimeScale {item[0]}: {item[1]}"


def level(item: Item) -> int:
    return logging.INFO if item[1] == "Ready" else logging.WARNING


@settings(max_examples=100)
@given(items=ITEMS)
def test_each_item_is_said_once_in_its_own_line_or_its_states(items: list[Item]) -> None:
    logger = logging.getLogger("tests.log_lists.grouped")
    lines = Lines()
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    try:
        say_each_or_grouped(
            logger, items, one=own, state=lambda item: item[1], shown=lambda item: item[0], level=level,
            many=lambda count, state, named, first: f"{count} RuntimeScales now {state}: {named} (e.g. {own(first)})")
    finally:
        logger.removeHandler(lines)
    if len(items) <= NAMED:
        assert lines.said == [(level(item), own(item)) for item in items]
        return
    states = list(dict.fromkeys(state for _, state in items))
    assert len(lines.said) == len(states)
    for (said_level, line), state in zip(lines.said, states, strict=True):
        group = [item for item in items if item[1] == state]
        assert said_level == level(group[0])
        if len(group) == 1:
            assert line == own(group[0])
        else:
            assert line.startswith(f"{len(group)} RuntimeScales now {state}: {group[0][0]}, ")
            assert line.endswith(f"(e.g. {own(group[0])})")
            named = min(len(group), NAMED)
            assert all(name in line for name, _ in group[:named])
            assert (f" and {len(group) - named} more " in line) == (len(group) > NAMED)
