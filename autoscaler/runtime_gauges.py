"""The per-runtime self-metric series (misses, values known, warming up, served values), kept as exposition text.

At 5,000 runtimes these are some 35,000 series, set after every refresh and sent, rendered, with every snapshot
(`autoscaler.api.selfmetrics_split`). As `prometheus_client` Gauges, rendering them (`generate_latest`) cost the
refresh process about 430 ms a refresh, more than all the API's answers: the text of every series was written
again although most values repeat from one refresh to the next. Here each series keeps its rendered line, written
again only when its value changes, and a family's text is the join of its lines.

The leader's per-pod deletion costs and per-RuntimeScale readiness (15,000 series at 5,000 runtimes) are set one
series at a time as it writes (`labels(...).set(value)`, `remove(...)`, as on a `prometheus_client` Gauge) and
kept the same way: as Gauges, `generate_latest` wrote all of them again at every refresh, 0.5 s of the leader's
refresh process at 5,000 runtimes against 10 ms for everything else on the page.

A `RuntimeGauge` is also an ordinary collector: registered in the adapter's registry, `collect()` yields the
family (the one-process `/metrics`, `get_sample_value` in tests), and `exposition()` is byte for byte what
`generate_latest` writes for it (tests/api/test_refresh_metrics_text.py checks that on any label values).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import cast

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

Labels = tuple[str, ...]
_go_float = cast(Callable[[float], str], floatToGoString)  # how the text format writes a value


def _escape(value: str) -> str:
    """A label value as the text format writes it (backslash, newline and double quote escaped)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class RuntimeGauge(Collector):
    """One gauge family whose series are replaced whole each refresh (`update`)."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self._order = sorted(range(len(labelnames)), key=labelnames.__getitem__)  # the text format sorts labels
        escaped_doc = documentation.replace("\\", r"\\").replace("\n", r"\n")
        self._head = f"# HELP {name} {escaped_doc}\n# TYPE {name} gauge\n"
        self._series: dict[Labels, tuple[float, str, str]] = {}  # labels -> value, label text, line
        self._text: bytes | None = None

    def update(self, current: Mapping[Labels, float]) -> None:
        """This refresh's series: exactly those in `current` (the others are gone), lines kept where the value
        is the same as last time."""
        previous, series = self._series, {}
        for labels, number in current.items():
            value = float(number)
            last = previous.get(labels)
            if last is not None and last[0] == value:
                series[labels] = last
                continue
            label_text = last[1] if last is not None else self._label_text(labels)
            series[labels] = (value, label_text, f"{self.name}{{{label_text}}} {_go_float(value)}\n")
        self._series = series
        self._text = None

    def set(self, labels: Labels, number: float) -> None:
        """One series set, the others kept."""
        value = float(number)
        last = self._series.get(labels)
        if last is not None and last[0] == value:
            return
        label_text = last[1] if last is not None else self._label_text(labels)
        self._series[labels] = (value, label_text, f"{self.name}{{{label_text}}} {_go_float(value)}\n")
        self._text = None

    def remove(self, *labels: str) -> None:
        """One series removed (none there: nothing to do, as with `prometheus_client`'s `remove`)."""
        if self._series.pop(labels, None) is not None:
            self._text = None

    def labels(self, *labels: str) -> _Series:
        """One series, to `set`, as `prometheus_client`'s `labels(...)` gives."""
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name} has labels {self.labelnames}, got {labels}")
        return _Series(self, labels)

    def _label_text(self, labels: Labels) -> str:
        return ",".join(f'{self.labelnames[i]}="{_escape(labels[i])}"' for i in self._order)

    def exposition(self) -> bytes:
        """The family in the text format, as `generate_latest` would write it."""
        if self._text is None:
            self._text = (self._head + "".join(entry[2] for entry in self._series.values())).encode()
        return self._text

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=list(self.labelnames))
        for labels, (value, _, _) in self._series.items():
            family.add_metric(list(labels), value)
        yield family


class _Series:
    __slots__ = ("_gauge", "_labels")

    def __init__(self, gauge: RuntimeGauge, labels: Labels) -> None:
        self._gauge = gauge
        self._labels = labels

    def set(self, value: float) -> None:
        self._gauge.set(self._labels, value)
