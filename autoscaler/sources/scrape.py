"""The default source: scrape every pod's exporter directly, no Prometheus needed.

Every cost of a refresh is bounded, whatever the pods do:
- at most `concurrency` scrapes at once, so a 10,000-pod fleet does not open 10,000 sockets;
- per scrape a short connect timeout, the per-pod timeout and a cap on the bytes read (`scrape_fetch`);
- a deadline for the whole refresh: scrapes still running when it passes are cancelled and count as
  timeouts, so a lost node's black-holed pods cannot stretch a refresh past `max_staleness`;
- pods whose scrapes time out (or fail slowly) are retried with backoff, and every failing pod goes after the
  others (`scrape_retry`), so a crowd of dead pods cannot starve a healthy one;
- one connection per pod, kept from one refresh to the next (`scrape_keepalive`), so exporters served over
  HTTPS cost a TLS handshake each when the adapter starts, not at every refresh;
- a pod whose containers declare ports but not the exporter's runs no sidecar (`kube_objects`): it is not
  scraped, and /debug and one WARNING per runtime say so (`no_exporter`), but no error is counted:
  modelmesh-serving runs runtimes nobody scales, and their pods must not read as a failing source.
A pod whose scrape fails (or is skipped) keeps its last good sample: the policies see it growing stale,
never idle.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Final

import aiohttp

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.sources.answered_pod import REASON_OTHER_POD, another_pod_said, names_another_pod
from autoscaler.sources.base import (
    DiscoveryOutage,
    PodDiscovery,
    PodTarget,
    RuntimeInventory,
    SourceDefaults,
    SourceProblem,
)
from autoscaler.sources.exporter_failures import (
    MODELMESH_COLLECTOR,
    NEVER_READ,
    cannot_read_modelmesh,
    modelmesh_fails_after,
)
from autoscaler.sources.exposition import ExporterReading, ExpositionError, read_exporter_text
from autoscaler.sources.held_gpu import with_gpu_read, with_last_gpu
from autoscaler.sources.pending_rates import PendingRates
from autoscaler.sources.scrape_fetch import (
    CONNECT_TIMEOUT_S,
    MAX_BODY_BYTES,
    FetchError,
    fetch_exposition,
    scrape_timeout,
    timeout_hint,
)
from autoscaler.sources.scrape_keepalive import scrape_keepalive_s
from autoscaler.sources.scrape_news import ScrapeNews
from autoscaler.sources.scrape_problems import REASON_NOT_SCRAPED, PodKey, ScrapeProblems, shown, streak
from autoscaler.sources.scrape_retry import ScrapeRetries
from exporter import names
from exporter.cert_reload import CertificateReloader
from exporter.flag_values import without_password

log = logging.getLogger(__name__)

_PodId = tuple[RuntimeKey, str, str | None]
"""A pod's last good sample is its own: the runtime, the pod's name and its uid (a pod created again under the
name is another pod), never its address, which a pod gone may leave to another."""

_GARBLED: Final = ("answered, but with no usable ModelMesh reading (a request rate that is NaN, infinite or "
                   "negative, or missing beside the other rates, or no modelmesh last-success timestamp): its load "
                   "signals are held")
_REFUSED: Final = "a value no real pod reaches, not believed (check the pod's exporter and ModelMesh)"


class ScrapeSource(SourceDefaults):
    name = "scrape"

    def __init__(
        self,
        discovery: PodDiscovery,
        *,
        timeout_s: float = 5.0,
        concurrency: int = 64,
        deadline_s: float = 15.0,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        max_body_bytes: int = MAX_BODY_BYTES,
        retries: ScrapeRetries | None = None,
        ssl_context: ssl.SSLContext | None = None,
        server_name: str | None = None,
        client_certificate: CertificateReloader | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"--scrape-concurrency must be at least 1, got {concurrency}")
        self._discovery = discovery
        self._timeout = scrape_timeout(timeout_s, connect_timeout_s)
        self._deadline_s = deadline_s
        self._max_body_bytes = max_body_bytes
        self._limit = asyncio.Semaphore(concurrency)
        self._concurrency = concurrency
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._server_name = server_name
        self._client_certificate = client_certificate  # reloaded into `ssl_context` (`scrape_tls`)
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None
        self._last_good: dict[_PodId, PodSample] = {}
        self._retries = retries or ScrapeRetries()
        self.errors: Counter[str] = Counter()
        self.reads = 0
        """Scrapes sent so far, failed or not (`modelmesh_autoscaler_source_reads_total`); not those still queued
        at a refresh's deadline, which were never tried."""
        self._news = ScrapeNews()
        self._problems = ScrapeProblems(self.errors, self._news, self._retries)
        self._pending_rates = PendingRates()  # exporters with no rates yet, reads counted (`_unusable`)
        self._discovery_outage = DiscoveryOutage()
        self._sent: set[PodKey] = set()  # this refresh's pods whose scrape left the concurrency queue
        self._unsent: set[PodKey] = set()  # pods still queued at the last refresh's deadline
        self._queued_said = False
        self._inventory: dict[RuntimeKey, RuntimeInventory] = {}  # as the last refresh listed it, for /debug

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # One connection per pod, kept from one refresh to the next (`scrape_keepalive`): over HTTPS, no
            # handshake per pod at every refresh. The refresh's deadline is its interval (`build_source`).
            connector = aiohttp.TCPConnector(limit=self._concurrency, ttl_dns_cache=300, ssl=self._ssl,
                                             keepalive_timeout=scrape_keepalive_s(self._deadline_s))
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        if self._client_certificate is not None:
            self._client_certificate.check()
        inventory = self._inventory = self._discovery.inventory()
        outage = self._discovery_outage
        self._note_discovery(outage, self._discovery, inventory, now)
        pods = [(runtime.key, pod) for runtime in inventory.values() for pod in runtime.pods]
        self._problems.note_without_exporter(pods, now)
        taken = self._problems.note_superseded(pods, now)
        samples = {(key, pod.name): self._fallback(key, pod) for key, pod in pods}
        due = [(key, pod) for key, pod in pods if pod.url is not None and pod.ready
               and (key, pod.name) not in taken and self._retries.due(streak(key, pod), now)]
        # Pods not failing first, and of those, the ones left unsent last time: the semaphore admits waiters in
        # order, so without the second key the same pods were last at every refresh, and starved for good.
        left = self._unsent
        due.sort(key=lambda entry: (self._retries.failures(streak(*entry)), (entry[0], entry[1].name)
                                    not in left))
        self._sent = set()
        tasks = {asyncio.create_task(self._pod_sample(key, pod, now)): (key, pod) for key, pod in due}
        self._unsent = set()
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=self._deadline_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            self._not_sent([tasks[task] for task in pending if (tasks[task][0], tasks[task][1].name)
                            not in self._sent], now)
            self._news.flush()
            for task in done:
                key, sample = task.result()
                samples[key, sample.name] = sample
        self._forget_vanished(inventory, pods)
        by_runtime: dict[RuntimeKey, list[PodSample]] = {key: [] for key in inventory}
        for key, pod in pods:
            by_runtime[key].append(samples[key, pod.name])
        return [
            self._problems.with_failures(runtime.snapshot(tuple(by_runtime[key]), now, True,
                                                          self._problems.models_unread(key),
                                                          outage.healthy(key.namespace)))
            for key, runtime in inventory.items()
        ]

    def _fallback(self, key: RuntimeKey, pod: PodTarget) -> PodSample:
        """The pod's last good sample, or none. Not another pod's of the same name (created again: a StatefulSet-
        like controller, a hand-made pod; in the same second too, which its creation time cannot tell), whose
        reading was held for the new one and counted fresh."""
        remembered = self._last_good.get(_pod_id(key, pod))
        if remembered is None or remembered.created_at != pod.created_at:
            return PodSample(name=pod.name, ready=pod.ready, created_at=pod.created_at, unready_since=pod.unready_since)
        return _with_readiness(remembered, pod)

    def _not_sent(self, queued: list[tuple[RuntimeKey, PodTarget]], now: float) -> None:
        """The pods still queued behind the concurrency bound when the refresh's deadline passed: never sent, so
        no scrape tried nor failed, and nothing the exporter did; said so in /debug, and logged when it starts,
        with the flag to raise. They go first at the next refresh."""
        detail = (f"not scraped: the refresh's {self._deadline_s:g} s ran out with {len(queued)} scrapes still "
                  f"queued behind --scrape-concurrency ({self._concurrency}); raise it, or --scrape-timeout is "
                  f"too long for this fleet")
        for key, pod in queued:
            self._problems.problem(key, pod, REASON_NOT_SCRAPED, detail, now)
            self._unsent.add((key, pod.name))
        if queued and not self._queued_said:
            log.warning("%d pods %s; they hold their last good samples and go first at the next refresh",
                        len(queued), detail)
        self._queued_said = bool(queued)

    async def _pod_sample(self, key: RuntimeKey, pod: PodTarget, now: float) -> tuple[RuntimeKey, PodSample]:
        async with self._limit:
            self.reads += 1
            self._sent.add((key, pod.name))
            started = time.monotonic()
            try:
                reading = await self._scrape(key, pod)
            except FetchError as error:
                self._problems.failed(key, pod, error.reason, str(error), now, time.monotonic() - started, error.told)
                return key, self._fallback(key, pod)
            except asyncio.CancelledError:
                self._problems.failed(key, pod, names.REASON_TIMEOUT,
                                      f"{shown(pod)}: no answer before the refresh deadline of {self._deadline_s:g} s; "
                                      f"{timeout_hint(pod.url or '')}", now,
                                      time.monotonic() - started)
                raise
        sample = reading.sample
        self._problems.note_clock((key, pod.name), reading.clock_offset_s)
        unusable = self._unusable(key, pod, reading)
        if unusable is not None:
            return key, self._count_garbled_and_hold(key, pod, sample, now, unusable)
        if reading.modelmesh_failures is not None and sample.sampled_at is not None:
            # ModelMesh broke after a good read: the exporter serves that read's values, at its time, and they are
            # the pod's as ever (they turn stale by that time, DESIGN.md §6); but why they stopped moving is said,
            # counted and shown, as for an exporter that started into the fault (`_unusable`).
            self._retries.succeeded(streak(key, pod))
            self._problems.count_garbled(key, pod, now, f"{shown(pod)}: "
                                         f"{modelmesh_fails_after(sample.sampled_at, reading.modelmesh_failures)}")
        else:
            ended = self._problems.ended(key, pod)
            # Said where its start was: a streak of failed scrapes, a garbage answer, or a failure at a URL since
            # corrected (a new streak: none of its own to end). Pods left unsent had one line for all of them.
            if (self._retries.succeeded(streak(key, pod))
                    or (ended is not None and ended.reason != REASON_NOT_SCRAPED)):
                self._news.recovered(f"{key}/{pod.name}")
        if sample.sampled_at is None:
            # No rate yet (`rates_pending`: an exporter before its second ModelMesh read, a new pod or a sidecar
            # restarted, for a few reads at most: `PendingRates`), or a pod never read (one whose ModelMesh
            # collector fails is said from its second scrape): not fresh yet, as a pod before its first read. Its
            # load signals are held, said by nobody and counted by nothing: it was a garbage WARNING and a source
            # error at every such start, a healthy rollout feeding ModelMeshAutoscalerSourceErrors.
            return key, self._hold_last_load(key, pod, sample)
        # Its GPU busy not read (the GPU collector failing) while its load is: the last good one, at its old time.
        sample = with_last_gpu(sample, self._fallback(key, pod))
        self._last_good[_pod_id(key, pod)] = sample
        self._problems.note_models_unread(key, pod, reading.models_unread, now)
        return key, sample

    def _unusable(self, key: RuntimeKey, pod: PodTarget, reading: ExporterReading) -> str | None:
        """What makes an answer with no load data a problem to say (`_count_garbled_and_hold`), or None for one
        that is not: a value above its ceiling; from a pod read before (its first answer is not fresh yet, as
        ModelMesh may have come up just after its exporter's last read), an exporter whose ModelMesh collector
        fails or never worked, or a ModelMesh reading missing or garbled; an exporter whose rates have not come
        after a few of its reads (`PendingRates`). An exporter before its second read (`rates_pending`) is none
        of these."""
        pod_id = _pod_id(key, pod)
        if not reading.rates_pending:
            self._pending_rates.ended(pod_id)
        if reading.refused is not None:
            return f"{shown(pod)}: {reading.refused}; {_REFUSED}"
        if reading.sample.sampled_at is not None:
            return None
        if reading.rates_pending:
            reads = self._pending_rates.overdue(pod_id, reading.modelmesh_read_at)
            return None if reads is None else f"{shown(pod)}: {_rates_never_came(reads)}"
        if pod_id not in self._last_good:
            return None
        if reading.modelmesh_failing:
            since = NEVER_READ if reading.modelmesh_read_at is None else "its reads fail since its last good one"
            return f"{shown(pod)}: {cannot_read_modelmesh(since)}"
        return f"{shown(pod)}: {_GARBLED}"

    def _count_garbled_and_hold(self, key: RuntimeKey, pod: PodTarget, sample: PodSample, now: float,
                                detail: str) -> PodSample:
        """An answer that parses but has no usable ModelMesh reading (a NaN rate, no ModelMesh success time),
        from a pod that had one, or one with a value above its ceiling (`refused`: a rate of 1e308 read as a
        million-fold load scaled the runtime to its maximum, silently): its load signals are held, as for a
        failed scrape, but it is counted (`garbage`, as the Prometheus source counts its garbled values), shown
        in /debug and logged when it starts, where it used to turn stale without a word. Its GPU reading, judged
        fresh on its own, is kept (unless it was the value refused). No backoff: the exporter answers, and its
        GPU reading is wanted at every refresh. `detail` says which (`_unusable`)."""
        self._problems.count_garbled(key, pod, now, detail)
        return self._hold_last_load(key, pod, sample)

    def _hold_last_load(self, key: RuntimeKey, pod: PodTarget, sample: PodSample) -> PodSample:
        """The pod's last good load signals, held for an answer without them (`sample`), with that answer's GPU
        reading, judged fresh on its own, and its word on whether it runs a GPU collector (the exporter's now);
        kept as the pod's last good sample."""
        held = self._fallback(key, pod)
        if sample.gpu_sampled_at is not None:
            held = with_gpu_read(held, sample)
        if held.no_gpu_collector != sample.no_gpu_collector:
            held = replace(held, no_gpu_collector=sample.no_gpu_collector)
        self._last_good[_pod_id(key, pod)] = held
        return held

    async def _scrape(self, key: RuntimeKey, pod: PodTarget) -> ExporterReading:
        """The pod's reading; raises `FetchError` for an answer refused: not one, not our exporter's, or from an
        exporter that names another pod (`answered_pod`: the pod's IP given to a new pod). A targets file's
        `user:password@` is `user:***@` in what the error says (the log, /debug), as everywhere else."""
        assert pod.url is not None
        try:
            return await self._read(key, pod, pod.url)
        except FetchError as error:
            if "@" not in pod.url:
                raise
            shown = without_password(pod.url)
            raise FetchError(error.reason, str(error).replace(pod.url, shown),
                             None if error.told is None else error.told.replace(pod.url, shown)) from error

    async def _read(self, key: RuntimeKey, pod: PodTarget, url: str) -> ExporterReading:
        requested_at = self._clock()
        text = await fetch_exposition(self._client(), url, max_bytes=self._max_body_bytes,
                                      server_name=self._server_name,
                                      answered_before=_pod_id(key, pod) in self._last_good)
        try:
            reading = read_exporter_text(text, pod.name, pod.ready, self._clock(), pod.created_at, requested_at)
        except ExpositionError as error:
            raise FetchError(names.REASON_PARSE, f"{url}: {error}") from error
        if names_another_pod(reading.pod, key.namespace, pod):
            assert reading.pod is not None
            raise FetchError(REASON_OTHER_POD, another_pod_said(url, reading.pod, key.namespace, pod),
                             another_pod_said(url, reading.pod, key.namespace, pod, told=True))
        return reading

    def _forget_vanished(self, inventory: dict[RuntimeKey, RuntimeInventory],
                         pods: list[tuple[RuntimeKey, PodTarget]]) -> None:
        """Drop what is kept of pods no longer listed: `pods`, the inventory's, as `collect` listed them."""
        listed = {_pod_id(key, pod) for key, pod in pods}
        for held in [held for held in self._last_good if held not in listed]:
            del self._last_good[held]
        self._pending_rates.forget_all_but(listed)
        self._problems.forget(pods)
        self._retries.forget_all_but(streak(key, pod) for key, runtime in inventory.items() for pod in runtime.pods)

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        """What fails now, for /debug: discovery out of date (its errors of the runtime's namespace), each of the
        runtime's pods whose last scrape failed, with its error and the time its run of failures began (a pod
        waiting out its backoff included), the pods whose sample, read or held, has per-model use unread, and its
        Ready pods that run no exporter (`ScrapeProblems.problems`)."""
        return self._discovery_outage.problems(key.namespace) + self._problems.problems(key)

    def scrape_urls(self, key: RuntimeKey) -> dict[str, str | None]:
        """Each of the runtime's pods' exporter URL, as the last refresh listed it (None where the pod is not
        scraped: no exporter declared, no IP yet), by pod name: /debug shows it for every pod, healthy or not,
        so that the scheme each was scraped over (`--exporter-scheme auto`: its port's name) can be checked.
        Asked once a refresh by the /debug render, never on the metric answers' path."""
        runtime = self._inventory.get(key)  # a targets file's `user:password@` shown as `***`, as logs show it
        return {} if runtime is None else {pod.name: shown(pod) for pod in runtime.pods}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _rates_never_came(reads: int) -> str:
    """An exporter whose ModelMesh reads work but whose rates have not come after `reads` of them."""
    return (f"its exporter read ModelMesh {reads} times ({names.LAST_SUCCESS_TIMESTAMP}{MODELMESH_COLLECTOR} "
            "moved) and still publishes no request rate (a rate needs two reads), so the pod's load signals are "
            "held: the exporter's log says why (ModelMesh restarting, or reads further apart than its --load-window)")


def _pod_id(key: RuntimeKey, pod: PodTarget) -> _PodId:
    return key, pod.name, pod.uid


def _with_readiness(sample: PodSample, pod: PodTarget) -> PodSample:
    if sample.ready == pod.ready and sample.unready_since == pod.unready_since:
        return sample
    return replace(sample, ready=pod.ready, unready_since=pod.unready_since)
