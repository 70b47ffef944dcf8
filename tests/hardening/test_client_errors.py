"""The client-error log filter and the selector's line ends, in-process, with an injected clock."""

from __future__ import annotations

import logging

import pytest
from aiohttp.http_exceptions import BadHttpMessage, BadHttpMethod, HttpProcessingError, LineTooLong
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.api.client_errors import ClientErrorLogFilter
from autoscaler.api.selector import SelectorError, deployment_from_selector


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record_of(error: BaseException) -> logging.LogRecord:
    """What aiohttp's `handle_error` logs: ERROR, the peer as the argument, the exception attached."""
    try:
        raise error
    except BaseException as raised:
        return logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1,
                                 "Error handling request from %s", ("10.0.0.7",), (type(raised), raised, None))


def test_first_client_error_is_one_warning_line_without_traceback() -> None:
    record = record_of(BadHttpMethod("Z" * 60_000))
    assert ClientErrorLogFilter(clock=Clock()).filter(record)
    assert record.levelname == "WARNING" and record.exc_info is None
    line = record.getMessage()
    assert "\n" not in line and len(line) < 300
    assert line.startswith("malformed request from 10.0.0.7: BadHttpMethod 400: Bad HTTP method in status line 'ZZZ")


def test_later_client_errors_in_the_interval_are_counted_not_logged() -> None:
    clock = Clock()
    log_filter = ClientErrorLogFilter(interval_s=60, clock=clock)
    assert log_filter.filter(record_of(BadHttpMessage("bad header")))
    clock.now += 59
    assert not log_filter.filter(record_of(LineTooLong("x" * 9000, "8190")))
    assert not log_filter.filter(record_of(BadHttpMessage("bad header")))
    clock.now += 1
    record = record_of(BadHttpMessage("bad header"))
    assert log_filter.filter(record)
    assert "(2 more in the last 60 s not logged)" in record.getMessage()


def test_control_characters_of_the_request_are_escaped() -> None:
    record = record_of(BadHttpMessage("bad \x1b[31mred\r\n\x00"))
    ClientErrorLogFilter(clock=Clock()).filter(record)
    assert "\x1b" not in record.getMessage() and "\x00" not in record.getMessage()
    assert "\\x1b[31mred" in record.getMessage()


@pytest.mark.parametrize("error", [HttpProcessingError(code=500, message="server side"), RuntimeError("bug")])
def test_server_errors_pass_unchanged(error: BaseException) -> None:
    log_filter = ClientErrorLogFilter(clock=Clock())
    for _ in range(3):
        record = record_of(error)
        assert log_filter.filter(record)
        assert record.levelname == "ERROR" and record.exc_info is not None


def _placed(value: str, line_end: str, where: str) -> str:
    return {"end": f"deployment={value}{line_end}", "start": f"{line_end}deployment={value}",
            "middle": f"deployment{line_end}={value}"}[where]


@given(value=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
       line_end=st.sampled_from(["\n", "\r", "\r\n", "\n\n"]),
       where=st.sampled_from(["end", "start", "middle"]))
def test_a_line_break_between_tokens_is_whitespace_as_apimachinery_reads_it(value: str, line_end: str,
                                                                            where: str) -> None:
    """apimachinery's selector lexer skips CR and LF as it skips blanks: kube-apiserver selects `x` for
    `deployment=x\\n`. The name given back holds label characters only, so no line break reaches a log."""
    assert deployment_from_selector(_placed(value, line_end, where)) == value


@given(value=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
       line_end=st.sampled_from(["\x0b", "\x0c", "\x85", "\u2028"]),
       where=st.sampled_from(["end", "start", "middle"]))
def test_other_line_ends_are_refused_and_shown_escaped(value: str, line_end: str, where: str) -> None:
    """A vertical tab, a form feed or a Unicode line separator is no whitespace to apimachinery: part of a
    key or value no label holds. The refusal shows it escaped (`\\x0b`), never as the character."""
    with pytest.raises(SelectorError) as refused:
        deployment_from_selector(_placed(value, line_end, where))
    assert line_end not in str(refused.value) and repr(line_end)[1:-1] in str(refused.value)
