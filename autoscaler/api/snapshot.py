"""Every answer the API can give about the runtimes, rendered to bytes once per refresh.

The refresh (discovery, scrape or Prometheus, decisions, actuation) produces `RuntimeView`s;
`autoscaler.api.render` turns them into a `ServingSnapshot`, defined here: for each runtime, the finished
HTTP answer (status, JSON bytes, freshness) for each served metric and for the KEDA endpoint, and what
`/debug` is written from when asked (`autoscaler.api.debug_document`: the view's fields, compact).
A metric or KEDA request then costs a lookup and a write, never a JSON encoding (only `/debug`, opened now
and then, is written when asked), and never waits on the refresh. A snapshot is immutable and replaced
whole, so a reader sees either the previous refresh or the next.

Snapshots travel between processes (`autoscaler.workers`) as one flat byte string
(`autoscaler.api.packed`) that the serving worker reads in place: swapping in a 5,000-runtime snapshot
decodes nothing, so requests do not wait on it.

Two stores serve an app: `SnapshotHolder` (a worker: the snapshot arrives from the refresh process) and
`autoscaler.api.render.RefresherSnapshots` (one process: rendered when the in-process refresher publishes).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Final, NamedTuple, Protocol

from aiohttp import web

from autoscaler.api.status import status_body
from autoscaler.model import RuntimeView
from autoscaler.names import ServedMetric

METRICS: tuple[ServedMetric, ...] = tuple(ServedMetric)
"""The order of the per-metric answers of a runtime."""
METRIC_INDEX: dict[ServedMetric, int] = {metric: index for index, metric in enumerate(METRICS)}

Answer = tuple[int, bytes, float | None]
"""(HTTP status, JSON body, age in seconds of the oldest sample behind a 200 answer at the refresh that rendered it
(served, it is that plus the time since: `handlers.served_age`), `SCALED_TO_ZERO_AGE` for the 503 of a runtime
scaled to zero, else None)."""


class RuntimeAnswers(NamedTuple):

    metrics: tuple[Answer, ...]  # in `METRICS` order
    keda: Answer
    debug: bytes  # the /debug record (`autoscaler.api.debug_document.debug_record`), not yet JSON


KEDA = len(METRICS)
"""`RuntimeTable.answer`'s index of the KEDA answer; the served metrics' are their `METRIC_INDEX`."""


class RuntimeTable(Mapping[tuple[str, str], RuntimeAnswers]):
    """(namespace, deployment) -> `RuntimeAnswers`, and one answer of a runtime without the others: a request
    asks for one, and a packed snapshot (`autoscaler.api.packed`) copies out only what is asked."""

    def answer(self, key: tuple[str, str], which: int) -> Answer | None:
        """The runtime's answer for `METRICS[which]`, or its KEDA answer (`KEDA`); None for no such runtime."""
        answers = self.get(key)
        if answers is None:
            return None
        return answers.keda if which == KEDA else answers.metrics[which]

    def debug_record(self, key: tuple[str, str]) -> bytes | None:
        answers = self.get(key)
        return None if answers is None else answers.debug


class RenderedRuntimes(RuntimeTable):
    """The answers as rendered, in a dict (the one-process mode, and what the refresh process packs)."""

    __slots__ = ("_answers",)

    def __init__(self, answers: dict[tuple[str, str], RuntimeAnswers]) -> None:
        self._answers = answers

    def __getitem__(self, key: tuple[str, str]) -> RuntimeAnswers:
        return self._answers[key]

    def get(self, key: tuple[str, str], default: object = None) -> RuntimeAnswers | None:  # type: ignore[override]
        return self._answers.get(key, default)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._answers)

    def __len__(self) -> int:
        return len(self._answers)


class ServingSnapshot(NamedTuple):
    ready: bool  # a first refresh has completed
    runtimes: RuntimeTable  # by (namespace, deployment)
    refresh_metrics: bytes = b""  # the refresh process's self-metrics (text exposition), where it is apart


EMPTY = ServingSnapshot(False, RenderedRuntimes({}))


def error_answer(code: int, message: str) -> Answer:
    return code, json.dumps(status_body(code, message)).encode(), None


SCALED_TO_ZERO_AGE: Final = -1.0
"""The age of a 503 answered for a runtime scaled to zero (no age is negative): `respond` counts it apart
(`modelmesh_autoscaler_api_scaled_to_zero_answers_total`), so that the 503 alert leaves out what is not wrong."""


def unknown_answer(view: RuntimeView, message: str) -> Answer:
    """The 503 for a runtime whose values are unknown; marked when it is scaled to zero (`SCALED_TO_ZERO_AGE`)."""
    code, body, _ = error_answer(503, message)
    return code, body, SCALED_TO_ZERO_AGE if view.scaled_to_zero else None


class SnapshotStore(Protocol):
    """Where the API reads its answers from."""

    @property
    def current(self) -> ServingSnapshot: ...

    @property
    def updated_at(self) -> float | None:
        """`time.monotonic()` when the refresh last delivered a snapshot, None before the first: how long the
        answers have not changed (`autoscaler.api.stall`)."""


class SnapshotHolder:
    """A snapshot replaced in one assignment by whoever receives the next one.

    `current` is a plain attribute, read by every request without a Python call (a property's getter is one);
    assigning it also notes `updated_at` (`__setattr__`, once a refresh)."""

    current: ServingSnapshot
    updated_at: float | None

    def __init__(self, snapshot: ServingSnapshot = EMPTY) -> None:
        object.__setattr__(self, "current", snapshot)
        object.__setattr__(self, "updated_at", None if snapshot is EMPTY else time.monotonic())

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        if name == "current":
            object.__setattr__(self, "updated_at", time.monotonic())


SNAPSHOT_KEY: web.AppKey[SnapshotStore] = web.AppKey("snapshots")
