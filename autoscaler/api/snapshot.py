"""Every answer the API can give about the runtimes, rendered to bytes once per refresh.

The refresh (discovery, scrape or Prometheus, decisions, actuation) produces `RuntimeView`s;
`autoscaler.api.render` turns them into a `ServingSnapshot`, defined here: for each runtime, the finished
HTTP answer (status, JSON bytes, freshness) for each served metric, for the KEDA endpoint and for `/debug`.
A request then costs a dict lookup and a write, never a JSON encoding, and never waits on the refresh. A
snapshot is immutable and replaced whole, so a reader sees either the previous refresh or the next.

Snapshots travel between processes (`autoscaler.workers`) as a pickle of plain tuples, dicts, bytes and
numbers: unpickling runs no Python code, so a serving worker swaps in a 5,000-runtime snapshot in
milliseconds.

Two stores serve an app: `SnapshotHolder` (a worker: the snapshot arrives from the refresh process) and
`autoscaler.api.render.RefresherSnapshots` (one process: rendered when the in-process refresher publishes).
"""

from __future__ import annotations

import json
import pickle
from typing import NamedTuple, Protocol

from aiohttp import web

from autoscaler.api.status import status_body
from autoscaler.names import ServedMetric

METRICS: tuple[ServedMetric, ...] = tuple(ServedMetric)
"""The order of the per-metric answers of a runtime."""
METRIC_INDEX: dict[ServedMetric, int] = {metric: index for index, metric in enumerate(METRICS)}

Answer = tuple[int, bytes, float | None]
"""(HTTP status, JSON body, age in seconds of the oldest sample behind a 200 answer, else None)."""


class RuntimeAnswers(NamedTuple):

    metrics: tuple[Answer, ...]  # in `METRICS` order
    keda: Answer
    debug: bytes


class ServingSnapshot(NamedTuple):
    ready: bool  # a first refresh has completed
    runtimes: dict[tuple[str, str], RuntimeAnswers]  # by (namespace, deployment)
    refresh_metrics: bytes = b""  # the refresh process's self-metrics (text exposition), where it is apart


EMPTY = ServingSnapshot(False, {})


def error_answer(code: int, message: str) -> Answer:
    return code, json.dumps(status_body(code, message)).encode(), None


def encode(snapshot: ServingSnapshot) -> bytes:
    """Plain tuples on the wire: unpickling calls no Python code."""
    plain = {key: tuple(answers) for key, answers in snapshot.runtimes.items()}
    return pickle.dumps((snapshot.ready, plain, snapshot.refresh_metrics), protocol=pickle.HIGHEST_PROTOCOL)


def decode(blob: bytes) -> ServingSnapshot:
    """The inverse of `encode`. Only ever fed by our own refresh process over a private pipe."""
    ready, plain, refresh_metrics = pickle.loads(blob)
    make = RuntimeAnswers._make
    return ServingSnapshot(bool(ready), {key: make(answers) for key, answers in plain.items()},
                           bytes(refresh_metrics))


class SnapshotStore(Protocol):
    """Where the API reads its answers from."""

    @property
    def current(self) -> ServingSnapshot: ...


class SnapshotHolder:
    """A snapshot replaced in one assignment by whoever receives the next one."""

    def __init__(self, snapshot: ServingSnapshot = EMPTY) -> None:
        self.current = snapshot


SNAPSHOT_KEY: web.AppKey[SnapshotStore] = web.AppKey("snapshots")
