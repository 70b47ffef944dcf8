"""`PrometheusSource`: every runtime's per-pod signals, read from Prometheus (DESIGN §3, §6, §8).

Where a cluster outgrows direct scraping, Prometheus (or Thanos, Mimir) already holds the exporters' series.
Each refresh asks it **one instant query per signal for all runtimes at once** (eight queries, whatever the
number of runtimes or pods), aggregated `by (namespace, pod)`, and joins the answers to discovery's inventory
here. Readiness, replicas and annotations come from discovery, never from Prometheus.

Freshness. An instant query stamps every result with the *evaluation* time, not the time of the sample it
found (which may be up to the 5-minute lookback old), so the freshness query asks `timestamp()` for the
scrape time and takes, per pod, the minimum of that and the exporter's own
`modelmesh_exporter_last_success_timestamp_seconds{collector="modelmesh"}`; a pod whose exporter reports no
such series falls back to the scrape time of its request rate. A pod with no freshness series was not seen
this refresh and keeps its last good sample.

Errors are owned here (the module's one exception, `PrometheusSourceError`, carries a `reason` and chains
the library's exception as its cause; it never leaves `collect()`):

- the backend fails as a whole (connection refused, timeout, HTTP error, a body that is not the expected
  JSON, or no series at all for the inventory's pods while Ready pods exist): every snapshot of that refresh
  says `source_ok=False` and carries each pod's **last good** `PodSample`, never zeros, so the policies hold.
  The failure is logged once per outage with the backend's detail, and again when it recovers.
- one series is garbage (NaN, ±Inf, negative, unparseable): only that pod's signal is absent (None), the
  refresh is still good. Logged once per pod and signal until it is good again.

Both are counted in `errors` by reason, and passed to the optional `on_error` callback (for self-metrics).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, cast

import requests
import urllib3
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.sources.base import PodDiscovery, RuntimeInventory
from exporter import names

log = logging.getLogger(__name__)

# Reasons counted in `PrometheusSource.errors` (the first four are whole-refresh failures).
REASON_CONNECT: Final = "connect"  # refused, reset, DNS: nothing answered
REASON_TIMEOUT: Final = "timeout"  # no answer within timeout_s (or the whole refresh took too long)
REASON_HTTP: Final = "http"  # an HTTP error status (bad query, Prometheus not ready, proxy 5xx)
REASON_PARSE: Final = "parse"  # the body is not the query API's JSON
REASON_EMPTY: Final = "empty"  # Ready pods exist but Prometheus has no series for any of them
REASON_GARBAGE: Final = "garbage"  # one series' value is NaN, infinite, negative or not a number

_CONNECT_ATTEMPTS: Final = 2
_CONNECT_RETRY_PAUSE_S: Final = 0.1

GpuSource = Literal["exporter", "dcgm"]
PodRef = tuple[str, str]  # (namespace, pod)


class PrometheusSourceError(Exception):
    """Prometheus could not be read for this refresh; `reason` is one of the module's REASON_* values."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class SignalQuery:
    """One PodSample field and the PromQL that yields it, one series per (namespace, pod)."""

    field: str
    promql: str


_FRESHNESS: Final = "sampled_at"


def build_queries(
    gpu_source: GpuSource = "exporter", *, namespace_label: str = "namespace", pod_label: str = "pod"
) -> tuple[SignalQuery, ...]:
    """The instant queries of one refresh, one per signal, each covering every pod Prometheus knows.

    Non-GPU signals use `max by` only to collapse duplicate series (a pod scraped by two jobs) and to drop
    labels we do not join on; GPU busy is the mean over a pod's GPUs (DESIGN §5). NaN survives `avg`/`max`
    of a single series, so garbage still reaches the validation in Python and is counted there.
    """
    by = f"{namespace_label}, {pod_label}"
    last_success = f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="{names.COLLECTOR_MODELMESH}"}}'
    if gpu_source == "dcgm":
        gpu = f"avg by ({by}) ({names.DCGM_GPU_UTIL}) / 100"
    else:
        gpu = f"avg by ({by}) ({names.GPU_BUSY_RATIO})"
    freshness = (
        f"min by ({by}) ("
        f'label_replace({last_success}, "freshness", "reported", "", "")'
        f' or label_replace(timestamp({last_success}), "freshness", "scraped", "", "")'
        f' or label_replace(timestamp({names.REQUESTS_PER_SECOND}), "freshness", "signal", "", ""))'
    )
    return (
        SignalQuery(_FRESHNESS, freshness),
        SignalQuery("gpu_busy", gpu),
        SignalQuery("requests_per_second", f"max by ({by}) ({names.REQUESTS_PER_SECOND})"),
        SignalQuery("queue_delay_s", f"max by ({by}) ({names.QUEUE_DELAY_SECONDS})"),
        SignalQuery("cache_misses_per_second", f"max by ({by}) ({names.CACHE_MISSES_PER_SECOND})"),
        SignalQuery("lru_age_s", f"max by ({by}) ({names.LRU_AGE_SECONDS})"),
        SignalQuery("cache_used_ratio", f"max by ({by}) ({names.CACHE_USED_RATIO})"),
        SignalQuery("models_loaded", f"max by ({by}) ({names.MODELS_LOADED})"),
    )


def _timed_out(error: requests.exceptions.RequestException) -> bool:
    """True when requests reports urllib3 retries that ran out on read timeouts as a ConnectionError.

    (Only ReadTimeoutError: urllib3's NewConnectionError, a refused connection, subclasses its TimeoutError.)
    """
    reason = getattr(error.args[0], "reason", None) if error.args else None
    return isinstance(reason, urllib3.exceptions.ReadTimeoutError)


def _older(sample: PodSample, previous: PodSample | None) -> bool:
    """True when `sample` describes an earlier time than the one we hold (a restarted Prometheus that lost
    recent data answers with older samples): a source never moves a pod's data back in time."""
    if previous is None or previous.sampled_at is None or sample.sampled_at is None:
        return False
    return sample.sampled_at < previous.sampled_at


def _valid(raw: str) -> float | None:
    """A sample value as the policies may use it: finite and non-negative, else None."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


class PrometheusSource:
    """A `MetricSource` that reads the exporters' series from Prometheus instead of scraping pods."""

    name = "prometheus"

    def __init__(
        self,
        discovery: PodDiscovery,
        url: str,
        *,
        timeout_s: float = 5.0,
        gpu_source: GpuSource = "exporter",
        clock: Callable[[], float] = time.time,
        headers: Mapping[str, str] | None = None,
        verify: bool | str = True,
        retry: Retry | None = None,
        namespace_label: str = "namespace",
        pod_label: str = "pod",
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        """`url` is Prometheus's base URL (no `/api/v1`); `timeout_s` bounds each HTTP request.

        urllib3 does not retry (`retry`, default `Retry(total=0, read=False)`, replaces the library's
        default of seconds of backoff, and its per-retry warnings); this class retries a refused connection
        once after 0.1 s and never a timeout (a slow Prometheus does not get faster), so a dead backend
        costs a refresh at most about 2 * `timeout_s`. `verify` is False, True or a CA bundle path;
        `headers` (e.g. Authorization) go with every request. `namespace_label`/`pod_label` name the labels
        Prometheus puts on the exporters' series (a PodMonitor's defaults). `on_error(reason)` is called
        for every counted error (self-metrics). The discovery stays the caller's to close.
        """
        self._discovery = discovery
        self._url = url.rstrip("/")
        self._timeout_s = timeout_s
        self._clock = clock
        self._on_error = on_error
        self._ns_label = namespace_label
        self._pod_label = pod_label
        self._signals = build_queries(gpu_source, namespace_label=namespace_label, pod_label=pod_label)
        self._deadline_s = 2 * timeout_s + 1.0
        self._session = requests.Session()
        self._session.verify = verify
        self._client = PrometheusConnect(
            url=self._url,
            headers=dict(headers or {}),
            # read=False: a read timeout surfaces as requests' ReadTimeout, not as a ConnectionError.
            retry=retry or Retry(total=0, read=False, raise_on_status=False),
            session=self._session,
            timeout=cast(int, timeout_s),  # hinted int, but passed as is to requests, which takes floats
        )
        self._last: dict[PodRef, PodSample] = {}
        self._garbage: set[tuple[str, str, str]] = set()
        self.errors: Counter[str] = Counter()
        """Failures by reason since start: whole-refresh reasons once per refresh, `garbage` per series."""
        self.outage_since: float | None = None
        """Clock time the current outage began; None while Prometheus answers."""
        self.last_error: PrometheusSourceError | None = None

    @property
    def queries(self) -> Sequence[str]:
        """The PromQL of one refresh, in order: for docs, dashboards and tests."""
        return tuple(signal.promql for signal in self._signals)

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        """One snapshot per runtime in the inventory; never raises."""
        inventory = self._discovery.inventory()
        try:
            answers = await self._query_all()
            seen = self._seen_pods(answers, inventory)
        except PrometheusSourceError as error:
            self._failed(error)
            answers, seen, backend_ok = {}, set(), False
        else:
            self._recovered()
            backend_ok = True
        source_ok = backend_ok and self._discovery.healthy
        snapshots = [
            self._snapshot(runtime, answers, seen, now, source_ok) for runtime in inventory.values()
        ]
        self._forget_vanished(inventory)
        return snapshots

    async def close(self) -> None:
        """Release the HTTP connections."""
        self._session.close()

    # ---- querying ----

    async def _query_all(self) -> dict[str, dict[PodRef, str]]:
        """Run every signal's query concurrently; all must succeed, or the refresh fails as a whole.

        Partial answers would be worse than none: a missing GPU query would read as "this pod has no GPU".
        """
        try:
            async with asyncio.timeout(self._deadline_s):
                outcomes = await asyncio.gather(
                    *(asyncio.to_thread(self._query, signal.promql) for signal in self._signals),
                    return_exceptions=True,
                )
        except TimeoutError as error:
            raise PrometheusSourceError(
                REASON_TIMEOUT, f"queries took longer than {self._deadline_s:.1f} s"
            ) from error
        answers: dict[str, dict[PodRef, str]] = {}
        for signal, outcome in zip(self._signals, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if isinstance(outcome, PrometheusSourceError):
                    raise outcome
                raise PrometheusSourceError(REASON_PARSE, f"{signal.field}: {outcome!r}") from outcome
            answers[signal.field] = outcome
        return answers

    def _query(self, promql: str) -> dict[PodRef, str]:
        """One blocking instant query (run in a worker thread), keyed by (namespace, pod).

        A refused or reset connection is retried once, quietly, after a short pause: it covers a restart
        blip or a pooled connection the server just closed without turning the refresh into an outage.
        (urllib3's own retries would log a warning per query per refresh while Prometheus is down.)
        """
        for attempt in range(_CONNECT_ATTEMPTS):
            try:
                return self._parse(promql, self._request(promql))
            except PrometheusSourceError as error:
                if error.reason != REASON_CONNECT or attempt + 1 == _CONNECT_ATTEMPTS:
                    raise
                log.debug("retrying %s once: %s", promql, error.detail)
                time.sleep(_CONNECT_RETRY_PAUSE_S)
        raise AssertionError("unreachable")  # pragma: no cover

    def _request(self, promql: str) -> Any:
        """The library call, with every exception it can raise turned into a PrometheusSourceError."""
        try:
            return self._client.custom_query(promql)
        except requests.exceptions.Timeout as error:  # before ConnectionError: ConnectTimeout is both
            raise PrometheusSourceError(REASON_TIMEOUT, f"{self._url}: {error}") from error
        except (requests.exceptions.ConnectionError, requests.exceptions.RetryError) as error:
            reason = REASON_TIMEOUT if _timed_out(error) else REASON_CONNECT
            raise PrometheusSourceError(reason, f"{self._url}: {error}") from error
        except PrometheusApiClientException as error:
            raise PrometheusSourceError(REASON_HTTP, f"{self._url}: {error}") from error
        except (ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
            raise PrometheusSourceError(REASON_PARSE, f"{self._url}: {error!r}") from error
        except requests.exceptions.RequestException as error:
            raise PrometheusSourceError(REASON_CONNECT, f"{self._url}: {error!r}") from error

    def _parse(self, promql: str, result: Any) -> dict[PodRef, str]:
        """Check the shape of a vector result and index its raw values; values are validated on join."""
        if not isinstance(result, list):
            raise PrometheusSourceError(REASON_PARSE, f"{promql}: result is {type(result).__name__}")
        values: dict[PodRef, str] = {}
        for item in result:
            try:
                labels, value = item["metric"], item["value"]
                ref = (labels[self._ns_label], labels[self._pod_label])
                values[ref] = value[1]
            except (KeyError, IndexError, TypeError) as error:
                if isinstance(item, dict) and isinstance(item.get("metric"), dict) and "value" in item:
                    continue  # a series without namespace/pod labels: not a pod we can join
                raise PrometheusSourceError(REASON_PARSE, f"{promql}: bad item {item!r}") from error
        return values

    # ---- joining ----

    def _seen_pods(
        self, answers: Mapping[str, Mapping[PodRef, str]], inventory: Mapping[RuntimeKey, RuntimeInventory]
    ) -> set[PodRef]:
        """Inventory pods with a freshness series; none at all while Ready pods exist is an outage."""
        freshness = answers[_FRESHNESS]
        pods = [(key.namespace, pod) for key, runtime in inventory.items() for pod in runtime.pods]
        seen = {(ns, pod.name) for ns, pod in pods if (ns, pod.name) in freshness}
        if not seen and any(pod.ready for _, pod in pods):
            raise PrometheusSourceError(
                REASON_EMPTY,
                f"no {names.LAST_SUCCESS_TIMESTAMP} or {names.REQUESTS_PER_SECOND} series for any of "
                f"{len(pods)} known pods ({len(freshness)} series with other {self._ns_label}/"
                f"{self._pod_label} labels): is Prometheus scraping the exporters, with those labels?",
            )
        return seen

    def _snapshot(
        self,
        runtime: RuntimeInventory,
        answers: Mapping[str, Mapping[PodRef, str]],
        seen: set[PodRef],
        now: float,
        source_ok: bool,
    ) -> RuntimeSnapshot:
        pods: list[PodSample] = []
        for target in runtime.pods:
            ref = (runtime.key.namespace, target.name)
            previous = self._last.get(ref)
            sample = self._read_pod(ref, answers) if ref in seen else None
            if sample is not None and not _older(sample, previous):
                self._last[ref] = sample
            else:  # not seen, garbage freshness, or older than what we had: hold the last good sample
                sample = previous or PodSample(name=target.name)
            pods.append(replace(sample, ready=target.ready, created_at=target.created_at))
        return RuntimeSnapshot(
            key=runtime.key,
            pods=tuple(pods),
            taken_at=now,
            source_ok=source_ok,
            replicas=runtime.replicas,
            annotations=dict(runtime.annotations),
        )

    def _read_pod(self, ref: PodRef, answers: Mapping[str, Mapping[PodRef, str]]) -> PodSample | None:
        """This refresh's sample of a pod; None when its freshness itself is garbage."""
        fields: dict[str, float | None] = {}
        for signal in self._signals:
            raw = answers[signal.field].get(ref)
            value = None if raw is None else _valid(raw)
            self._note_garbage(ref, signal.field, bad=raw is not None and value is None, raw=raw)
            fields[signal.field] = value
        if fields[_FRESHNESS] is None:
            return None
        return PodSample(
            name=ref[1],
            sampled_at=fields[_FRESHNESS],
            gpu_busy=fields["gpu_busy"],
            requests_per_second=fields["requests_per_second"],
            queue_delay_s=fields["queue_delay_s"],
            cache_misses_per_second=fields["cache_misses_per_second"],
            lru_age_s=fields["lru_age_s"],
            cache_used_ratio=fields["cache_used_ratio"],
            models_loaded=fields["models_loaded"],
        )

    def _note_garbage(self, ref: PodRef, field: str, *, bad: bool, raw: str | None) -> None:
        key = (ref[0], ref[1], field)
        if not bad:
            self._garbage.discard(key)
            return
        self._count(REASON_GARBAGE)
        if key not in self._garbage:
            self._garbage.add(key)
            log.warning("Prometheus gave %s/%s a %s of %r; leaving it absent", ref[0], ref[1], field, raw)

    def _forget_vanished(self, inventory: Mapping[RuntimeKey, RuntimeInventory]) -> None:
        """Drop memory of pods discovery no longer lists, so it stays bounded as pods come and go."""
        known = {(key.namespace, pod.name) for key, runtime in inventory.items() for pod in runtime.pods}
        for ref in [ref for ref in self._last if ref not in known]:
            del self._last[ref]
        self._garbage = {key for key in self._garbage if (key[0], key[1]) in known}

    # ---- outage bookkeeping ----

    def _count(self, reason: str) -> None:
        self.errors[reason] += 1
        if self._on_error is not None:
            self._on_error(reason)

    def _failed(self, error: PrometheusSourceError) -> None:
        self._count(error.reason)
        self.last_error = error
        if self.outage_since is None:
            self.outage_since = self._clock()
            log.warning(
                "Prometheus at %s failed (%s): %s; holding last good samples until it answers",
                self._url, error.reason, error.detail,
            )
        else:
            log.debug("Prometheus still failing (%s): %s", error.reason, error.detail)

    def _recovered(self) -> None:
        if self.outage_since is not None:
            down_s = self._clock() - self.outage_since
            log.info("Prometheus at %s answers again after %.0f s", self._url, down_s)
        self.outage_since = None
        self.last_error = None

