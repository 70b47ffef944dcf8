"""Reads the local ModelMesh container's `/metrics` and turns its counters into per-pod load signals.

A background loop (`run`) fetches ModelMesh's exposition, parses it (`exporter.modelmesh_text`) and folds
its counters into a `CounterWindow` (`exporter.counters`): running totals that survive a ModelMesh restart,
and rates over the last `load_window_s`. With ModelMesh's per-model metrics on, it also keeps when each model
was last served here (`exporter.model_recency`). `collect()` only formats the last good scrape.

A scrape that fails or is garbled changes nothing: the last good values stay published and the health
timestamp stays where it was, so consumers can see the data is old instead of seeing zero load.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import dataclasses
import logging
import os
import ssl
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final

import aiohttp
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter import names
from exporter.body_pieces import BodyPieces
from exporter.collectors.health import CollectorHealth
from exporter.counters import CounterWindow
from exporter.model_recency import ModelRecency
from exporter.modelmesh_families import ModelMeshFamilies
from exporter.modelmesh_text import (
    QUEUE_COUNT,
    REQUESTS,
    SAMPLES_READ,
    ModelMeshReading,
    ScrapeFailure,
    parse_modelmesh,
)
from exporter.settings import setting
from exporter.worker_thread import in_worker_thread

log = logging.getLogger(__name__)


MAX_BODY_BYTES: Final = 32 << 20
"""The largest ModelMesh answer read (32 MiB). What the exporter asks for (`_ONLY_SAMPLES_READ`) is about 0.4 KiB
per model with per-model metrics on: some 80,000 models at this size, each of whose series is kept from read to
read, which peaks near 255-290 MiB resident, inside the sidecar's 512Mi memory limit
(manifests/examples/exporter-sidecar-patch.yaml; held by tests/exporter/test_exporter_memory_limit.py). A body
of shorter lines holds more series in these bytes: the series are bounded too (`MAX_SERIES_READ`). All of
ModelMesh's output, about 25 KiB per model, passes this at some 1,300 models."""

PARSE_OFF_LOOP_CHARS: Final = 1 << 20
"""A body this large (1 MiB: some 2,500 models with the query honoured) is parsed in a worker thread. The largest
(`MAX_BODY_BYTES`) takes 0.2 s of CPU with the narrow reader and 0.8 s where it gives up and prometheus_client
reads it, five times that under the sidecar's 200m CPU limit: on the event loop, /healthz and /metrics waited for
it, near the liveness probe's 5 s timeout. (The narrow reader's time is mostly regular expressions in C, which
hold Python's lock: the thread helps the library's parse.) Smaller bodies parse in microseconds to milliseconds,
less than the thread hop costs."""

_ONLY_SAMPLES_READ: Final = tuple(("name[]", name) for name in SAMPLES_READ)
"""The query that asks ModelMesh for the samples the exporter reads and nothing else. Its metrics server
(simpleclient's `filteredMetricFamilySamples`) keeps only the samples of those names, so the histograms come
without their buckets and the families not read stay out: with per-model metrics on, 1,400 models used in a pod
are about 35 MiB of text in all (every histogram has a series per model, buckets included), over what the
exporter reads (`MAX_BODY_BYTES`), and 2 % of that when asked so. A server that ignores the query sends
everything, which is read as before."""

_URL: Final = setting("--modelmesh-url")
_NOT_METRICS: Final = frozenset({"text/html", "application/json", "application/xml", "text/xml"})
"""Content types no metrics endpoint sends: a body of one that cannot be read is named as such, not as
ModelMesh's metrics with series missing. Only the failure's words change: what parses is read whatever its type."""
_INSECURE: Final = setting("--modelmesh-insecure", "true")
_SCHEME_SETTING: Final = ("modelmesh-serving's metrics.scheme (the mm container's MM_METRICS=prometheus:...;"
                           "scheme=...)")
"""Where a ModelMesh runtime's metrics port is set to http or https."""
_NO_HANDSHAKE: Final = (f"no TLS handshake: where ModelMesh serves plain http, {_SCHEME_SETTING} is http: use an "
                        f"http:// URL in {_URL}")


def _connect_said(error: aiohttp.ClientConnectorError) -> str:
    """A connection that failed, as host:port and the OS's words (`Connection refused`): aiohttp's own words,
    `Cannot connect to host 127.0.0.1:2112 ssl:default [Connect call failed ...]`, named TLS on an http:// URL."""
    cause = error.os_error
    words = (os.strerror(cause.errno) if cause.errno is not None and cause.errno > 0
             else cause.strerror or str(cause) or type(cause).__name__)  # a name's lookup: gaierror's own words
    host = f"[{error.host}]" if ":" in error.host else error.host  # an IPv6 address, as a URL writes it
    return f"cannot connect to {host}:{error.port}: {words}"


def _redirects_said(error: aiohttp.TooManyRedirects) -> str:
    """A redirect loop, said with where it went: aiohttp's own words for it are `0, message=''` and the URL with
    the exporter's whole `name[]` query. ModelMesh's metrics port never redirects, so something else answers at
    the URL (a proxy's login page, most likely), and where it sends the reads is what points at it."""
    targets = dict.fromkeys(response.headers.get(aiohttp.hdrs.LOCATION, "?") for response in error.history)
    return (f"too many redirects ({len(error.history)}), to {', '.join(targets)}: ModelMesh's metrics port does not "
            f"redirect; is {_URL} ModelMesh's metrics port, or a proxy in front of it?")


_QUEUE_UNTIMED: Final = (
    "ModelMesh ran %s requests in this pod and timed none in its request queue "
    f"({names.MM_QUEUE_DELAY_MS}): it times them only where the model server limits each model's concurrency "
    "(limitModelConcurrency in its runtime status; for modelmesh-serving's built-in runtimes, the ServingRuntime "
    "annotation perModelConcurrencyLimit, which sets LIMIT_PER_MODEL_CONCURRENCY on the adapter). Until then "
    f"{names.QUEUE_DELAY_SECONDS} reads 0 here and no pod counts as saturated by its queue")
"""Said once: ModelMesh times a request's queueing only in `MaxConcCacheEntry.beforeInvoke` (kserve/modelmesh
`ModelMesh.java`, v0.9.0 on), before the request runs, so within one container its queue count is at least its
request count there, and stays 0 where it does not limit model concurrency (the built-in runtimes' default)."""
_REQUESTS_UNSEEN: Final = (
    f"ModelMesh timed %s requests in its request queue ({names.MM_QUEUE_DELAY_MS}) but none of its request "
    f"series ({names.MM_INVOKE_MODEL_MS}), which count every request it runs, is there, two reads in a row: "
    f"{names.REQUESTS_PER_SECOND} reads 0 here. Check that {_URL} is this pod's ModelMesh metrics port, and that "
    f"its ModelMesh names its request histogram {names.MM_INVOKE_MODEL_MS}")
"""Said once, the converse of `_QUEUE_UNTIMED`: ModelMesh times a request in its queue before it runs it, and
counts it in the request histogram when it ends, so a queue count with no request series at all across two reads
(one request still running at one read is not) is a request histogram the exporter does not find. A series that
vanishes is refused as a garbled read (`CounterWindow`); one never seen has nothing to lose, and read 0 silently."""

_SERVED_UNKNOWN: Final = (
    "ModelMesh counted requests of %s models before this exporter's first read (the sidecar restarted while "
    "ModelMesh ran): when it served them is unknown, so " + names.MODEL_LAST_SERVED_TIMESTAMP + " is left out "
    "(per-model use not known yet, which the adapter holds the cache term on, not 'served none') until each of them "
    "is served again, or for %s s (--model-recency-horizon) at most")
"""Said once, at the first read, where it counted models (`exporter.model_recency`): the family's absence
explained."""
_SERVED_KNOWN: Final = (
    names.MODEL_LAST_SERVED_TIMESTAMP + " is published: each model counted before this exporter's first read is "
    "served since, or its time is past the %s s horizon (--model-recency-horizon)")


class ModelMeshCollector(Collector):
    """Scrapes ModelMesh in the background and publishes the per-pod load and cache metrics.

    `clock` is monotonic time for the rate windows and the loop (a wall-clock step must not bend a rate);
    the health timestamps use the wall clock of `health`.
    """

    def __init__(
        self,
        health: CollectorHealth,
        url: str,
        *,
        ssl_context: ssl.SSLContext | bool = True,
        timeout_s: float = 2.0,
        load_window_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_series: int | None = None,
        model_recency_horizon_s: float = 3600.0,
        ca_file: Path | None = None,
    ) -> None:
        """`model_recency_horizon_s`: how long a model stays published after this pod last served it (0: the
        per-model series is off). `ca_file`: the CA bundle `ssl_context` trusts, if one was given (named in
        the log when a certificate does not verify). `max_series`: the most series read a body may hold
        (None: `MAX_SERIES_READ`)."""
        self._ca_file = ca_file
        self._health = health
        self._max_body_bytes = max_body_bytes
        self._max_series = max_series
        self._url = url
        self._ssl = ssl_context
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._clock = clock
        self._wall_clock = wall_clock
        self._window = CounterWindow(load_window_s, late_s=timeout_s)
        self._published: ModelMeshFamilies | None = None
        """What `collect` serves: the last good read's families, frozen, replaced (not changed) by each read."""
        self._reads = 0
        self._recency = ModelRecency(model_recency_horizon_s) if model_recency_horizon_s > 0 else None
        self._queue_untimed_told = False
        self._requests_unseen_told = False
        self._requests_unseen_last = False
        """The last reading counted queued requests and had no request series."""
        health.register(names.COLLECTOR_MODELMESH)

    @property
    def window(self) -> CounterWindow:
        return self._window

    async def scrape_once(self, session: aiohttp.ClientSession) -> bool:
        """One scrape; on failure the previous values stay and the failure is counted by reason."""
        started = time.perf_counter()
        try:
            text, at, content_type = await self._fetch(session)
            try:
                if sum(map(len, text)) >= PARSE_OFF_LOOP_CHARS:
                    reading = await in_worker_thread(self._parse, text)
                    del text  # up to 32 MiB, not held while the counts are folded in (`MAX_BODY_BYTES`)
                    self._fold(reading, at)
                else:
                    self.ingest(text, at)
            except ScrapeFailure as failure:
                if content_type in _NOT_METRICS:  # a proxy's error page, or another port's: say so
                    raise ScrapeFailure(failure.reason, f"the answer is {content_type}, not metrics ({failure}): is "
                                        f"{_URL} ModelMesh's metrics port?") from failure
                raise
        except ScrapeFailure as failure:
            # Before a first good read (ModelMesh takes tens of seconds to start) there are no values to keep.
            served = ("keeping last good values" if self._published is not None
                      else "no ModelMesh series until a read works")
            self._health.failed(names.COLLECTOR_MODELMESH, failure.reason, f"{self._url}: {failure}", served=served)
            return False
        finally:
            self._health.observe_duration(names.COLLECTOR_MODELMESH, time.perf_counter() - started)
        self._health.succeeded(names.COLLECTOR_MODELMESH, news=self._window.news)
        return True

    def ingest(self, text: str | Sequence[str], at: float) -> None:
        """Parse one body read at monotonic time `at` and fold it in; raises ScrapeFailure, changing nothing."""
        self._fold(self._parse(text), at)

    def _parse(self, text: str | Sequence[str]) -> ModelMeshReading:
        """`parse_modelmesh`, bounded by `max_series` where one was given (else by its own default)."""
        return parse_modelmesh(text) if self._max_series is None else parse_modelmesh(text, self._max_series)

    def _fold(self, reading: ModelMeshReading, at: float) -> None:
        """Fold one parsed reading, read at monotonic time `at`, into the windows and what `collect` serves."""
        risen = self._window.add(reading, at)
        now = self._wall_clock()
        if self._recency is not None:
            unknown = self._recency.unknown
            self._recency.update(reading, risen, now)
            if risen is None and self._recency.unknown:
                log.info(_SERVED_UNKNOWN, self._recency.unknown, f"{self._recency.horizon_s:g}")
            elif unknown and not self._recency.unknown:
                log.info(_SERVED_KNOWN, f"{self._recency.horizon_s:g}")
        totals = self._window.latest
        assert totals is not None  # a reading was just added
        recency = self._recency
        reports = recency is not None and recency.reports
        self._published = ModelMeshFamilies(
            # Its gauges are served; its counts live on in the window: held here too, 80,000 models' were 17 MiB more
            dataclasses.replace(reading, counters={}), totals, self._window.rates(), reading.lru_age_at(now),
            recency.horizon_s if recency is not None and reports else None,
            dict(recency.last_served) if recency is not None and reports else {})
        self._reads += 1
        if not self._queue_untimed_told and reading.total(REQUESTS) > 0 and reading.total(QUEUE_COUNT) == 0:
            self._queue_untimed_told = True
            log.warning(_QUEUE_UNTIMED, f"{reading.total(REQUESTS):.0f}")
        unseen = reading.total(QUEUE_COUNT) > 0 and not reading.counters.get(REQUESTS)
        if unseen and self._requests_unseen_last and not self._requests_unseen_told:
            self._requests_unseen_told = True
            log.warning(_REQUESTS_UNSEEN, f"{reading.total(QUEUE_COUNT):.0f}")
        self._requests_unseen_last = unseen

    async def _fetch(self, session: aiohttp.ClientSession) -> tuple[list[str], float, str]:
        """The body, the time its counters were read (when the response headers arrived), and its content type.

        A server that hangs up before answering on a reused keep-alive connection is retried once at once:
        that is the server closing an idle connection as we sent, not an outage.
        """
        for attempt in (1, 2):
            try:
                async with session.get(self._url, params=_ONLY_SAMPLES_READ, ssl=self._ssl,
                                       timeout=self._timeout) as response:
                    at = self._clock()
                    if response.status != 200:
                        raise ScrapeFailure(names.REASON_HTTP, f"HTTP {response.status}")
                    return await self._body(response), at, response.content_type
            except TimeoutError as error:
                raise ScrapeFailure(names.REASON_TIMEOUT, f"no answer within {self._timeout.total} s") from error
            except (aiohttp.ClientConnectorCertificateError, ssl.SSLCertVerificationError) as error:
                raise ScrapeFailure(names.REASON_TLS, f"{error} ({self._unverified_hint()})") from error
            except (aiohttp.ClientSSLError, ssl.SSLError) as error:
                raise ScrapeFailure(names.REASON_TLS, f"{error} ({_NO_HANDSHAKE})") from error
            except aiohttp.ClientConnectorError as error:
                if self._url.startswith("https://") and isinstance(error.os_error, ConnectionResetError):
                    # accepted, then dropped at the client's hello: a plain-http server that does not answer it
                    raise ScrapeFailure(names.REASON_TLS, f"{_connect_said(error)}: the server hung up on the TLS "
                                        f"handshake ({_NO_HANDSHAKE})") from error
                raise ScrapeFailure(names.REASON_CONNECT, _connect_said(error)) from error
            except aiohttp.ServerDisconnectedError as error:
                if attempt == 1:
                    continue
                hint = ""
                if self._url.startswith("http://"):
                    hint = (f" (ModelMesh closes plain-http connections unanswered where it serves https, its "
                            f"default; {_SCHEME_SETTING} says which: for https use an https:// URL in {_URL} with "
                            f"{_INSECURE})")
                raise ScrapeFailure(names.REASON_CONNECT, f"server closed the connection: {error}{hint}") from error
            except aiohttp.TooManyRedirects as error:
                raise ScrapeFailure(names.REASON_HTTP, _redirects_said(error)) from error
            except aiohttp.ClientPayloadError as error:
                raise ScrapeFailure(names.REASON_PARSE, f"incomplete body: {error}") from error
            except aiohttp.ClientConnectionError as error:
                raise ScrapeFailure(names.REASON_CONNECT, str(error)) from error
            except (aiohttp.ClientError, UnicodeDecodeError) as error:
                raise ScrapeFailure(names.REASON_PARSE, str(error)) from error
        raise AssertionError("unreachable")  # pragma: no cover

    def _unverified_hint(self) -> str:
        """What to change when the certificate does not verify: ModelMesh's own is self-signed and made anew at
        every start, so the flag that skips the check; with a CA file (a proxy of the user's), the CA file or
        the certificate, as the settings refuse both together."""
        if self._ca_file is not None:
            return (f"the certificate is not signed by a CA in {self._ca_file}, or does not name the URL's host: "
                    f"fix the certificate or --modelmesh-ca-file; for ModelMesh's own port, whose certificate is "
                    f"self-signed, drop the CA file for {_INSECURE}")
        return (f"ModelMesh's metrics port serves a self-signed certificate it makes anew at every start: run the "
                f"exporter with {_INSECURE}; the request stays inside the pod")

    async def _body(self, response: aiohttp.ClientResponse) -> list[str]:
        """The body as text in pieces of whole lines (`exporter.body_pieces`: decoded as it comes, never held
        as bytes and text at once), read up to `max_body_bytes`: past that it is no ModelMesh output the exporter
        can use (what it asks for is about 1 MB for 2,000 models with per-model metrics), and reading on would
        only fill the sidecar's memory (a server that never stops answering reached 1 GB within the 2 s
        timeout)."""
        encoding = "utf-8"  # as `response.text()` decodes: the declared charset if Python knows it, else UTF-8
        if response.charset:
            with contextlib.suppress(LookupError, ValueError):
                name = codecs.lookup(response.charset).name
                b"".decode(name)  # a text encoding (not a transform such as rot13, which no text is sent in)
                encoding = name
        body = BodyPieces(encoding)
        read = 0
        async for chunk in response.content.iter_chunked(1 << 16):
            read += len(chunk)
            if read > self._max_body_bytes:
                raise ScrapeFailure(names.REASON_PARSE, f"body larger than {self._max_body_bytes:,} bytes; stopped "
                                    "reading (not ModelMesh's metrics, or far more series than any ModelMesh has)")
            body.add(chunk)
        return body.end()

    async def run(self, interval_s: float) -> None:
        """Scrape every `interval_s` until cancelled; an unexpected error is logged and the loop goes on."""
        async with aiohttp.ClientSession() as session:
            while True:
                started = self._clock()
                try:
                    await self.scrape_once(session)
                except Exception as error:  # a bug must not stop collection for good
                    log.exception("ModelMesh scrape failed unexpectedly")
                    self._health.failed(names.COLLECTOR_MODELMESH, names.REASON_INTERNAL, repr(error))
                await asyncio.sleep(max(0.0, interval_s - (self._clock() - started)))

    def describe(self) -> Iterable[Metric]:
        """The families `collect` may yield: the registry learns a collector's names only from here, and its
        `name[]` filter (`/metrics?name[]=...`) finds nothing of a collector it has no names for."""
        yield CounterMetricFamily(names.REQUESTS_TOTAL, "")
        for name in (names.REQUESTS_PER_SECOND, names.QUEUE_DELAY_SECONDS, names.CACHE_MISSES_PER_SECOND,
                     names.LRU_AGE_SECONDS, names.CACHE_USED_RATIO, names.CACHE_CAPACITY_BYTES, names.MODELS_LOADED):
            yield GaugeMetricFamily(name, "")
        if self._recency is not None:
            yield GaugeMetricFamily(names.MODEL_RECENCY_HORIZON, "")
            yield GaugeMetricFamily(names.MODEL_LAST_SERVED_TIMESTAMP, "", labels=[names.MODEL_ID_LABEL])

    @property
    def reads(self) -> int:
        """How many good reads were folded in: `collect` changes only when this does."""
        return self._reads

    def collect(self) -> Iterable[Metric]:
        """The families of the last good read (none before one). Safe in a worker thread while the event loop
        takes the next read (`exporter.modelmesh_families`): `exporter.rendered_metrics` renders them there."""
        published = self._published
        return () if published is None else published.collect()
