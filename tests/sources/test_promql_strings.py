"""A label value written into a query as a PromQL string reads back as itself, as a real Prometheus reads it.

`promql_string` escaped backslashes and double quotes only, and PromQL's strings cannot hold a raw newline: a pod
named in a targets file with one made every query that names it `unterminated quoted string` (a 400), so the
source failed as a whole. Not an injection (the value cannot leave its string), but every runtime went unknown.
"""

from __future__ import annotations

import pytest

from autoscaler.sources.prometheus_matchers import one_of, promql_string
from tests.fakes.prometheus import Sample
from tests.sources.conftest import StartPrometheus

VALUES = ["plain", 'with "quotes"', "back\\slash", "new\nline", "carriage\rreturn", "tab\there", "bell\x07",
          "\u00e9t\u00e9"]


async def test_each_value_selects_its_own_series(start_prometheus: StartPrometheus, now: float) -> None:
    prometheus = await start_prometheus(
        [Sample("probe_value", {"pod": value}, index, now - 10) for index, value in enumerate(VALUES)])
    for index, value in enumerate(VALUES):
        found = await prometheus.query(f"probe_value{{pod={promql_string(value)}}}")
        assert [(item["metric"]["pod"], item["value"][1]) for item in found] == [(value, str(index))], value
    every = await prometheus.query(f"probe_value{{{one_of('pod', VALUES)}}}")
    assert sorted(item["metric"]["pod"] for item in every) == sorted(VALUES)


@pytest.mark.parametrize("value", VALUES)
def test_a_promql_string_is_one_line(value: str) -> None:
    assert "\n" not in promql_string(value) and "\r" not in promql_string(value)
