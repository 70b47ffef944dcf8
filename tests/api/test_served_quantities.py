"""Served values as the HPA and KEDA read them back, for any float the decision may hand the API.

The HPA reads an external metric's `value` with `resource.ParseQuantity` and takes `Quantity.MilliValue()`, an
int64 (kubernetes `pkg/controller/podautoscaler/metrics/client.go`, `GetExternalMetric`). `hpa_milli_value`
below is what that returns for the `"<digits>m"` strings the adapter writes, read from apimachinery's
`quantity.go` and `scale_int.go`: up to 18 digits parse to an int64 exactly; longer ones go through `inf.Dec`,
and `MilliValue` then returns `big.Int.Int64()` of the milli count, its low 64 bits (a count of 2^63 or more
reads wrapped, often negative: the HPA would then scale to its minimum). KEDA's `metrics-api` scaler reads the
JSON number at `valueLocation` as a float64.
"""

from __future__ import annotations

import dataclasses
import decimal
import json
import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.api.handlers import metric_answer
from autoscaler.api.render import render_snapshot
from autoscaler.api.runtimes import keda_answer
from autoscaler.api.snapshot import KEDA, METRIC_INDEX
from autoscaler.model import RuntimeKey, RuntimeView, ServedValue
from autoscaler.names import ServedMetric
from tests.api.builders import KEY, NOW, runtime_view

_INT64 = 2**64
_QUANTITY = re.compile(r"(0|[1-9][0-9]*)m")


def hpa_milli_value(quantity: str) -> int:
    """`resource.MustParse(quantity).MilliValue()` for a milli quantity as the adapter writes it."""
    match = _QUANTITY.fullmatch(quantity)
    assert match is not None, f"not a milli quantity as the adapter writes them: {quantity!r}"
    count = int(match.group(1))
    return (count + 2**63) % _INT64 - 2**63  # exact below 2^63 (int64 or inf.Dec alike), wrapped above


def with_value(view: RuntimeView, metric: ServedMetric, value: float) -> RuntimeView:
    return dataclasses.replace(view, values={**view.values, metric: ServedValue(value, value, NOW - 5.0)})


extreme = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.inf, -0.0, 5e-324, 0.0004999, 0.0005, 9.2e15, 9223372036854775.0, 9223372036854776.0,
                     1e16, 1e300, 1.7976931348623157e308]),
)


@settings(max_examples=400, deadline=None)
@given(value=extreme, metric=st.sampled_from(list(ServedMetric)))
def test_the_hpa_reads_what_was_meant_or_gets_a_503_and_holds(value: float, metric: ServedMetric) -> None:
    """Every value is either served as a quantity whose int64 milli-value is the value to the milli, or is
    unknown (503, KEDA's `null`); never a quantity the HPA reads as another number, never an exception."""
    view = with_value(runtime_view(), metric, value)
    status, body, _ = metric_answer(view, metric)
    keda_status, keda_body, _ = keda_answer(view)
    assert keda_status == 200
    keda_value = json.loads(keda_body, parse_float=decimal.Decimal)[metric.value]  # the number as written
    if status == 503:
        assert json.loads(body)["reason"] == "ServiceUnavailable"
        assert keda_value is None
        return
    assert status == 200
    milli = hpa_milli_value(json.loads(body)["items"][0]["value"])
    assert abs(milli - value * 1000) <= 0.5 + value * 1e-12  # to the milli (and a float's last bits)
    # KEDA's number, as written, is the HPA's: exactly, to the milli, up to where a float's 17 digits run out
    # (a KEDA that multiplies the parsed float64 by 1000 and truncates can still read 128.688 as 128.687: 128.688
    # x 1000 is 128687.99999999999 in floats; `== milli` on floats failed there)
    assert abs(keda_value * 1000 - milli) <= abs(milli) * decimal.Decimal("1e-15")


def test_one_runtime_s_unservable_value_leaves_every_other_answer_served() -> None:
    """A pod whose LRU age reads 1e-320 s makes its runtime's cache pressure infinite (and a request rate of
    1e308 its request load). That metric is unknown; the runtime's other metrics, and every other runtime, are
    served as before. (Rendering once raised here, and the serving workers kept the previous snapshot: every
    runtime's values froze until the adapter restarted.)"""
    other = RuntimeKey(KEY.namespace, "modelmesh-serving-other")
    broken = with_value(runtime_view(), ServedMetric.CACHE_PRESSURE, math.inf)
    snapshot = render_snapshot({broken.key: broken, other: runtime_view(other)}, ready=True)

    broken_key, other_key = (broken.key.namespace, broken.key.deployment), (other.namespace, other.deployment)
    for metric in ServedMetric:
        status, _, _ = snapshot.runtimes.answer(broken_key, METRIC_INDEX[metric]) or (0, b"", None)
        assert status == (503 if metric is ServedMetric.CACHE_PRESSURE else 200)
        assert (snapshot.runtimes.answer(other_key, METRIC_INDEX[metric]) or (0,))[0] == 200
    status, body, _ = snapshot.runtimes.answer(broken_key, KEDA) or (0, b"", None)
    assert status == 200
    assert json.loads(body)[ServedMetric.CACHE_PRESSURE.value] is None
    assert json.loads(body)[ServedMetric.DESIRED_REPLICAS.value] is not None
