"""How `PrometheusSource` asks Prometheus, and how it checks the answers (docs/design.md): `PrometheusReader`
runs one round of the queries `prometheus_promql` writes, concurrently, over one HTTP session, and indexes
each answer's raw values by (namespace, pod); it measures Prometheus's clock against the adapter's
(`PrometheusReader.clock_offset_s`: the round's `time()` answer against when it was asked; every query of the
round is then evaluated at that one instant, `prometheus_instant`).

Deadline: one per refresh (`begin_refresh`), one round's (`round_deadline_s`), shared by the round and the
scrape-interval check's reads after it (`sample_times`, `flags`): the stall limit and the late-refresh line count
on a refresh waiting on Prometheus no longer. A check's read that it cuts raises `OutOfTime`.

Errors: every failure of the library (`prometheus_request`) or of an answer's shape is a `PrometheusSourceError`
with one of the REASON_* values, and fails the whole round: partial answers would be worse than none. A
well-shaped series with a garbage value is not an error here; `samples.valid_value` tells the source, which leaves
only that signal absent.

The HTTP session, the parameters every query carries and the token: `prometheus_connection`; each answer read by
pod, and the series set apart from the values: `prometheus_vectors`; the check's reads: `prometheus_check_reads`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from urllib3.util.retry import Retry

from autoscaler.sources.exposition import clock_offset
from autoscaler.sources.prometheus_answers import REASON_CONNECT, REASON_PARSE, REASON_TIMEOUT, PrometheusSourceError
from autoscaler.sources.prometheus_check_reads import OutOfTime, read_flags, read_sample_times
from autoscaler.sources.prometheus_connection import PrometheusConnection
from autoscaler.sources.prometheus_deadline import round_deadline_s
from autoscaler.sources.prometheus_instant import CLOCK_QUERY, evaluation_time, pinned
from autoscaler.sources.prometheus_limits import named
from autoscaler.sources.prometheus_modelmesh_failing import MODELMESH_FAILING, FailingAnswer, failing_pods
from autoscaler.sources.prometheus_promql import RECENT_MODELS, PodRef, SignalQuery
from autoscaler.sources.prometheus_vectors import Answers, ModelAnswers, VectorIndex, models_by_pod
from exporter.pod_identity import PodIdentity

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

T = TypeVar("T")

_CONNECT_ATTEMPTS: Final = 2
_CONNECT_RETRY_PAUSE_S: Final = 0.1


class PrometheusReader(VectorIndex):
    """Runs one round of signal queries against Prometheus's HTTP API; owns the HTTP session."""

    def __init__(
        self,
        url: str,
        signals: tuple[SignalQuery, ...],
        *,
        timeout_s: float,
        headers: Mapping[str, str] | None,
        verify: bool | str,
        token_file: Path | None = None,
        retry: Retry | None,
        namespace_label: str,
        pod_label: str,
        clock: Callable[[], float] = time.time,
        models_query: str | None = None,
        failing_query: str | None = None,
    ) -> None:
        """See `PrometheusSource`, which passes its settings through; `models_query` (`build_models_query`) and
        `failing_query` (`prometheus_modelmesh_failing`) are run beside the signals' queries, and each may fail
        alone."""
        self.signals = signals
        self.models_query = models_query
        self.models: ModelAnswers | None = None
        """The last round's models answer; None when the query is not asked, or failed (`models_error`)."""
        self.models_error: PrometheusSourceError | None = None
        self.failing_query = failing_query
        self.failing: FailingAnswer | None = None
        """The last round's pods whose exporter says its ModelMesh collector fails; None when the query is not
        asked, or failed (`failing_error`)."""
        self.failing_error: PrometheusSourceError | None = None
        self._ns_label = namespace_label
        self._pod_label = pod_label
        self._clock = clock
        self.clock_offset_s = 0.0
        """How far Prometheus's clock was ahead of ours (negative: behind) at the last good round; 0 within
        CLOCK_TOLERANCE_S, or when no answer had a series to tell its evaluation time."""
        self._deadline_s = round_deadline_s(timeout_s)
        self._ends_at: float | None = None
        """When the refresh being read must be over, on the event loop's clock (`begin_refresh`)."""
        # One thread per query, owned here: asyncio's default executor has min(32, CPUs + 4) threads for the
        # whole process, 6 on a 2-CPU node, so the nine queries went in two waves and a refresh took twice its
        # slowest query. And a pooled connection each: urllib3 keeps 10 by default, and a round of more queries
        # discarded the others' with a WARNING a refresh ("Connection pool is full").
        self._queries_at_once = len(signals) + 2  # the signals', the recent models' and the failing collectors'
        self._threads = concurrent.futures.ThreadPoolExecutor(max_workers=self._queries_at_once,
                                                              thread_name_prefix="prometheus-query")
        self._connection = PrometheusConnection(url, timeout_s=timeout_s, headers=headers, verify=verify,
                                                token_file=token_file, retry=retry, pool_size=self._queries_at_once,
                                                on_warnings=self._warned)
        self.unlabelled: list[str] = []
        """The queries of the last round that answered series without the namespace or pod label (one per series,
        appended from the query threads): Prometheus names them otherwise, and the flags say how."""
        self.other_pods: dict[PodRef, PodIdentity] = {}
        """The last round's pods whose exporter names another pod (`prometheus_other_pod`: the freshness answer's
        extra series, set apart from its values), and the pod it names."""
        self.no_gpu_collector: set[PodRef] = set()
        """The last round's pods whose exporter has no GPU collector (`prometheus_no_gpu`: the GPU freshness
        answer's marker series, set apart from its values)."""
        self.warnings: list[str] = []
        """What the last round's answers said about themselves (Thanos's partial-response `warnings`), in order,
        without repeats; appended from the query threads."""
        self._round = 0
        """The round being read; moved on when a round is given up, so that its threads start no request."""

    def close(self) -> None:
        """Release the HTTP connections and the query threads (a query still reading is cut off)."""
        self._round += 1
        self._threads.shutdown(wait=False, cancel_futures=True)
        self._connection.close()

    def begin_refresh(self) -> float:
        """Start a refresh's deadline, one round's from now, which its round (also a round asked again at once) and
        the check's reads after it share; when it ends, on the event loop's clock. Each had a deadline of its own:
        a slow but answering Prometheus held one refresh three deadlines, past the stall limit built on one."""
        self._ends_at = asyncio.get_running_loop().time() + self._deadline_s
        return self._ends_at

    def _refresh_ends_at(self) -> float:
        """The deadline of the refresh being read (`begin_refresh`, which the source calls at each refresh); one from
        now where none was ever started."""
        return self.begin_refresh() if self._ends_at is None else self._ends_at

    async def read_all(self) -> Answers:
        """Run every signal's query concurrently; all must succeed, or the refresh fails as a whole.

        Partial answers would be worse than none: a missing GPU query would read as "this pod has no GPU".
        """
        self._connection.read_token()
        self.warnings, self.unlabelled, self.other_pods, self.no_gpu_collector = [], [], {}, set()
        self.models, self.models_error = None, None
        self.failing, self.failing_error = None, None
        self._round += 1
        round_ = self._round
        try:
            async with asyncio.timeout_at(self._refresh_ends_at()):
                loop = asyncio.get_running_loop()
                params = await loop.run_in_executor(self._threads, self._round_params, round_)
                models = (None if self.models_query is None else loop.run_in_executor(
                    self._threads, self._query_models, self.models_query, round_, params))
                failing = (None if self.failing_query is None else loop.run_in_executor(
                    self._threads, self._query_failing, self.failing_query, round_, params))
                models_asked = _outcome(models)  # typed apart: within gather(), mypy widens T to the outcome
                failing_asked = _outcome(failing)
                outcomes, models_outcome, failing_outcome = await asyncio.gather(
                    asyncio.gather(*(loop.run_in_executor(self._threads, self._query, signal.promql, round_, params)
                                     for signal in self.signals), return_exceptions=True),
                    models_asked,
                    failing_asked,
                )
        except TimeoutError as error:
            raise self._given_up("queries") from error
        self.models, self.models_error = _answer_or_error(models_outcome, RECENT_MODELS)
        self.failing, self.failing_error = _answer_or_error(failing_outcome, MODELMESH_FAILING)
        answers: Answers = {}
        for signal, outcome in zip(self.signals, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if isinstance(outcome, PrometheusSourceError):
                    raise named(outcome, signal.field)
                raise PrometheusSourceError(REASON_PARSE, f"{signal.field}: {outcome!r}") from outcome
            answers[signal.field] = outcome
        return answers

    async def flags(self) -> dict[str, str] | None:
        """Prometheus's command-line flags as /api/v1/status/flags says them (Thanos Query serves the page too,
        with its own flags); None where nothing says them (Mimir and VictoriaMetrics serve no such page, a proxy
        refuses it). `OutOfTime` where the refresh's deadline or a read timeout cut it (`_bounded`)."""
        return await self._bounded(functools.partial(read_flags, self._connection), "reading /api/v1/status/flags")

    async def sample_times(self, selector: str, window_s: float) -> list[list[float]]:
        """The times of the samples each series of `selector` has in the last `window_s`, read with a range
        selector (which no lookback-delta bounds), a list per series; none where it has none, or the query fails.
        `OutOfTime` where the refresh's deadline or a read timeout cut it (`_bounded`)."""
        return await self._bounded(functools.partial(read_sample_times, self._connection, selector, window_s),
                                   "reading the samples' spacing")

    async def _bounded(self, ask: Callable[[], T], what: str) -> T:
        """`ask()` in a query thread, within what is left of the refresh's deadline, and cut as a round is past it:
        a page trickled a byte at a time would otherwise hold the refresh that asked, and a query thread, for ever.
        Not sent once the deadline has passed. `OutOfTime` where it was cut."""
        loop = asyncio.get_running_loop()
        ends_at = self._refresh_ends_at()
        if loop.time() >= ends_at:
            raise OutOfTime(f"{what}: the refresh's {self._deadline_s:.1f} s were used up before it was asked")
        try:
            async with asyncio.timeout_at(ends_at):
                return await loop.run_in_executor(self._threads, ask)
        except TimeoutError as error:
            self._given_up(what)  # its connection shut, its thread free
            raise OutOfTime(f"{what} was cut at the refresh's deadline, {self._deadline_s:.1f} s from its "
                            "start") from error

    def _given_up(self, what: str) -> PrometheusSourceError:
        """The error of requests past the round's deadline, their connections shut: their threads may be in reads
        that never time out (an answer trickled a byte at a time), which would hold every thread, and every later
        round would wait behind them."""
        self._round += 1  # the given-up round's threads start no more requests
        cut = self._connection.cut()
        return PrometheusSourceError(
            REASON_TIMEOUT, f"{what} took longer than {self._deadline_s:.1f} s"
            + (f" (closed the {cut} connections still open)" if cut else ""))

    def _round_params(self, round_: int) -> dict[str, str]:
        """The round's query parameters, pinned to Prometheus's now (`prometheus_instant`), and its clock offset
        (measured from the send, so it errs towards older data)."""
        asked_at = self._clock()
        params = self._connection.params
        result = self._retrying(round_, CLOCK_QUERY, lambda: self._connection.request(CLOCK_QUERY, params))
        evaluated_at = evaluation_time(result)
        self.clock_offset_s = (0.0 if evaluated_at is None
                               else clock_offset(evaluated_at, asked_at, self._clock()))
        return pinned(params, asked_at if evaluated_at is None else evaluated_at)

    def _warned(self, said: Sequence[str]) -> None:
        """`check_answer`'s sink for a partial answer's warnings (list appends are atomic across threads)."""
        self.warnings.extend(warning for warning in said if warning not in self.warnings)

    def _query(self, promql: str, round_: int, params: dict[str, str],
               key: Callable[[Mapping[str, str]], Any] | None = None) -> dict[Any, str]:
        """One blocking instant query (run in a worker thread) of round `round_`, keyed by (namespace, pod)."""
        result = self._retrying(round_, promql, lambda: self._connection.request(promql, params))
        return self._parse(promql, result, key or self._pod_key)

    def _retrying(self, round_: int, promql: str, ask: Callable[[], Any]) -> Any:
        """`ask()` (one request of round `round_`), retried as follows.

        A refused or reset connection is retried once, quietly, after a short pause: it covers a restart
        blip or a pooled connection the server just closed without turning the refresh into an outage.
        (urllib3's own retries would log a warning per query per refresh while Prometheus is down.) Neither
        try starts once the round is given up (its connections cut): nobody waits for the answer.
        """
        for attempt in range(_CONNECT_ATTEMPTS):
            if round_ != self._round:
                raise PrometheusSourceError(REASON_TIMEOUT, "the round was given up at its deadline")
            try:
                return ask()
            except PrometheusSourceError as error:
                if error.reason != REASON_CONNECT or attempt + 1 == _CONNECT_ATTEMPTS:
                    raise
                log.debug("retrying %s once: %s", promql, error.detail)
                time.sleep(_CONNECT_RETRY_PAUSE_S)
        raise AssertionError("unreachable")  # pragma: no cover

    def _query_models(self, promql: str, round_: int, params: dict[str, str]) -> ModelAnswers:
        """The models query (run in a worker thread), as `_query` runs a signal's, indexed by pod then model."""
        return models_by_pod(self._query(promql, round_, params, key=self._model_key))

    def _query_failing(self, promql: str, round_: int, params: dict[str, str]) -> FailingAnswer:
        """The failing-collector query (run in a worker thread), as `_query` runs a signal's, indexed by pod."""
        return failing_pods(self._query(promql, round_, params, key=self._failing_key))


async def _outcome(future: asyncio.Future[T] | None) -> T | BaseException | None:
    """A query's answer or its exception (the models' and the failing collectors' fail alone), None when it was
    not asked."""
    if future is None:
        return None
    try:
        return await future
    except Exception as error:  # any failure of this query only leaves the models out
        return error


def _answer_or_error(outcome: T | BaseException | None,
                     query: str) -> tuple[T | None, PrometheusSourceError | None]:
    """An optional query's answer (None where it was not asked), or why it has none, named by `query`: its failure
    fails nothing but itself (`_outcome`)."""
    if isinstance(outcome, PrometheusSourceError):
        return None, named(outcome, query)
    if isinstance(outcome, BaseException):
        return None, PrometheusSourceError(REASON_PARSE, f"{query}: {outcome!r}")
    return outcome, None

