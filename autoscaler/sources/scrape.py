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
from typing import Final, TypeVar

import aiohttp

from autoscaler.log_lists import NAMED, few
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.source_problems import REASON_GARBAGE
from autoscaler.sources.answered_pod import REASON_OTHER_POD, another_pod_said, names_another_pod
from autoscaler.sources.base import (
    DiscoveryOutage,
    PodDiscovery,
    PodTarget,
    RuntimeInventory,
    SourceDefaults,
    SourceProblem,
    ongoing_problem,
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
from autoscaler.sources.scrape_retry import ScrapeRetries
from autoscaler.sources.shared_addresses import REASON_ADDRESS_REUSED, superseded
from exporter import names
from exporter.cert_reload import CertificateReloader
from exporter.flag_values import without_password

log = logging.getLogger(__name__)

_Pod = TypeVar("_Pod")
_PodKey = tuple[RuntimeKey, str]
_PodId = tuple[RuntimeKey, str, str | None]
"""A pod's last good sample is its own: the runtime, the pod's name and its uid (a pod created again under the
name is another pod), never its address, which a pod gone may leave to another."""

REASON_NO_EXPORTER: Final = "no_exporter"
"""A `SourceProblem`'s reason, not an error: a Ready pod runs no exporter sidecar
(`PodTarget.undeclared_exporter_port`)."""


REASON_NOT_SCRAPED: Final = "not_scraped"
"""A `SourceProblem`'s reason, not an error: the pod's scrape was still queued behind --scrape-concurrency when
the refresh's deadline passed, so it was never sent."""
_ANSWERED_OR_UNSENT: Final = frozenset({REASON_GARBAGE, REASON_NO_EXPORTER, REASON_NOT_SCRAPED, REASON_ADDRESS_REUSED})
"""Problems that are no failed scrape (`RuntimeSnapshot.read_failures`): an answer without usable load data (said in the
runtime's own words: its signals are held), no sidecar, a scrape never sent."""
_GARBLED: Final = ("answered, but with no usable ModelMesh reading (a request rate that is NaN, infinite or "
                   "negative, or missing beside the other rates, or no modelmesh last-success timestamp): its load "
                   "signals are held")
_REFUSED: Final = "a value no real pod reaches, not believed (check the pod's exporter and ModelMesh)"
_MODELS_UNREAD: Final = (f"every {names.MODEL_LAST_SERVED_TIMESTAMP} it published was garbage (NaN, negative or "
                         "+Inf): its per-model use is unread, no sign that ModelMesh stopped reporting it, so the "
                         "runtime's memory of per-model use does not age while its sample is that reading's (check "
                         "the pod's exporter)")


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
        self._superseded: set[_PodKey] = set()  # pods whose address a newer pod is listed at, as last said
        self._clock_offsets: dict[_PodKey, float] = {}  # pods whose exporter clock is off, as last logged
        self._retries = retries or ScrapeRetries()
        self.errors: Counter[str] = Counter()
        self.reads = 0
        """Scrapes sent so far, failed or not (`modelmesh_autoscaler_source_reads_total`); not those still queued
        at a refresh's deadline, which were never tried."""
        self._news = ScrapeNews()
        self._pending_rates = PendingRates()  # exporters with no rates yet, reads counted (`_unusable`)
        self._failing: dict[RuntimeKey, dict[str, SourceProblem]] = {}  # pods whose last scrape failed, by runtime
        self._without_exporter: dict[RuntimeKey, dict[str, SourceProblem]] = {}  # Ready pods with no sidecar
        self._discovery_outage = DiscoveryOutage()
        self._sent: set[_PodKey] = set()  # this refresh's pods whose scrape left the concurrency queue
        self._unsent: set[_PodKey] = set()  # pods still queued at the last refresh's deadline
        # Pods whose last good sample came from a reading whose every model last-served time was garbage
        # (`ExporterReading.models_unread`), by runtime, for /debug; their runtimes' snapshots say `models_unread`
        # while that sample is theirs, read this refresh or held (`_note_models_unread`).
        self._models_unread: dict[RuntimeKey, dict[tuple[str, str | None], SourceProblem]] = {}
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
        self._note_without_exporter(pods, now)
        taken = self._note_superseded(pods, now)
        samples = {(key, pod.name): self._fallback(key, pod) for key, pod in pods}
        due = [(key, pod) for key, pod in pods if pod.url is not None and pod.ready
               and (key, pod.name) not in taken and self._retries.due(_streak(key, pod), now)]
        # Pods not failing first, and of those, the ones left unsent last time: the semaphore admits waiters in
        # order, so without the second key the same pods were last at every refresh, and starved for good.
        left = self._unsent
        due.sort(key=lambda entry: (self._retries.failures(_streak(*entry)), (entry[0], entry[1].name)
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
            self._with_failures(runtime.snapshot(tuple(by_runtime[key]), now, True, key in self._models_unread,
                                                 outage.healthy(key.namespace)))
            for key, runtime in inventory.items()
        ]

    def _with_failures(self, snapshot: RuntimeSnapshot) -> RuntimeSnapshot:
        """`snapshot` with why its pods' last scrapes failed (`RuntimeSnapshot.read_failures`), where they did:
        a pod waiting out its backoff too."""
        failing = self._failing.get(snapshot.key)
        if not failing:
            return snapshot
        failures = {pod: f"scrape failed ({problem.reason})" for pod, problem in failing.items()
                    if problem.reason not in _ANSWERED_OR_UNSENT}
        return replace(snapshot, read_failures=failures) if failures else snapshot

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
            self._problem(key, pod, REASON_NOT_SCRAPED, detail, now)
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
                self._failed(key, pod, error.reason, str(error), now, time.monotonic() - started, error.told)
                return key, self._fallback(key, pod)
            except asyncio.CancelledError:
                self._failed(key, pod, names.REASON_TIMEOUT,
                             f"{_shown(pod)}: no answer before the refresh deadline of {self._deadline_s:g} s; "
                             f"{timeout_hint(pod.url or '')}", now,
                             time.monotonic() - started)
                raise
        sample = reading.sample
        self._note_clock((key, pod.name), reading.clock_offset_s)
        unusable = self._unusable(key, pod, reading)
        if unusable is not None:
            return key, self._count_garbled_and_hold(key, pod, sample, now, unusable)
        if reading.modelmesh_failures is not None and sample.sampled_at is not None:
            # ModelMesh broke after a good read: the exporter serves that read's values, at its time, and they are
            # the pod's as ever (they turn stale by that time, DESIGN.md §6); but why they stopped moving is said,
            # counted and shown, as for an exporter that started into the fault (`_unusable`).
            self._retries.succeeded(_streak(key, pod))
            self._count_garbled(key, pod, now, f"{_shown(pod)}: "
                                f"{modelmesh_fails_after(sample.sampled_at, reading.modelmesh_failures)}")
        else:
            failing = self._failing.get(key)
            ended = failing.pop(pod.name, None) if failing is not None else None
            # Said where its start was: a streak of failed scrapes, a garbage answer, or a failure at a URL since
            # corrected (a new streak: none of its own to end). Pods left unsent had one line for all of them.
            if (self._retries.succeeded(_streak(key, pod))
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
        self._note_models_unread(key, pod, reading.models_unread, now)
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
            return f"{_shown(pod)}: {reading.refused}; {_REFUSED}"
        if reading.sample.sampled_at is not None:
            return None
        if reading.rates_pending:
            reads = self._pending_rates.overdue(pod_id, reading.modelmesh_read_at)
            return None if reads is None else f"{_shown(pod)}: {_rates_never_came(reads)}"
        if pod_id not in self._last_good:
            return None
        if reading.modelmesh_failing:
            since = NEVER_READ if reading.modelmesh_read_at is None else "its reads fail since its last good one"
            return f"{_shown(pod)}: {cannot_read_modelmesh(since)}"
        return f"{_shown(pod)}: {_GARBLED}"

    def _note_models_unread(self, key: RuntimeKey, pod: PodTarget, unread: bool, now: float) -> None:
        """Keep whether the pod's new last good sample has per-model use unread (`unread`: its exporter published
        last-served times, every one garbage; rare), since the first such reading. A failed or garbled scrape
        leaves it: the sample held is that reading's, and its runtime's snapshot says `models_unread` until a
        good reading replaces it. Noted only per refresh, a pod whose scrapes failed after such a reading read as
        one whose ModelMesh reports no per-model use, and /debug said nothing of either."""
        unread_pods = self._models_unread.get(key, {})
        held = pod.name, pod.uid  # the pod's own sample, as `_last_good` keeps it
        if not unread:
            if unread_pods.pop(held, None) is not None and not unread_pods:
                del self._models_unread[key]
            return
        self._models_unread.setdefault(key, {})[held] = unread_pods.get(held) or SourceProblem(
            REASON_GARBAGE, f"{_shown(pod)}: {_MODELS_UNREAD}", now, pod.name)

    def _count_garbled_and_hold(self, key: RuntimeKey, pod: PodTarget, sample: PodSample, now: float,
                                detail: str) -> PodSample:
        """An answer that parses but has no usable ModelMesh reading (a NaN rate, no ModelMesh success time),
        from a pod that had one, or one with a value above its ceiling (`refused`: a rate of 1e308 read as a
        million-fold load scaled the runtime to its maximum, silently): its load signals are held, as for a
        failed scrape, but it is counted (`garbage`, as the Prometheus source counts its garbled values), shown
        in /debug and logged when it starts, where it used to turn stale without a word. Its GPU reading, judged
        fresh on its own, is kept (unless it was the value refused). No backoff: the exporter answers, and its
        GPU reading is wanted at every refresh. `detail` says which (`_unusable`)."""
        self._count_garbled(key, pod, now, detail)
        return self._hold_last_load(key, pod, sample)

    def _count_garbled(self, key: RuntimeKey, pod: PodTarget, now: float, detail: str) -> None:
        """Count an answer without new load data as `garbage`, show it in /debug, and say it when it starts (or
        its reason changes): once an outage, not at every refresh."""
        self.errors[REASON_GARBAGE] += 1
        before = self._problem(key, pod, REASON_GARBAGE, detail, now)
        if before is None or before.reason != REASON_GARBAGE:
            self._news.failed(f"{key}/{pod.name}", REASON_GARBAGE, detail)

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

    def _note_superseded(self, pods: list[tuple[RuntimeKey, PodTarget]], now: float) -> dict[_PodKey, str]:
        """The pods whose address a newer pod is listed at too (`shared_addresses`): not scraped this refresh,
        shown in /debug, and said when it starts (an error nowhere: the pod is gone, its object not yet)."""
        taken = superseded(pods)
        noted: set[_PodKey] = set()
        started = []
        for key, pod in pods:
            holder = taken.get((key, pod.name))
            if holder is None or not pod.ready:  # one not Ready is not scraped anyway
                continue
            noted.add((key, pod.name))
            detail = (f"{pod.url} is also the address of {holder}: its IP was given again, so what answers there "
                      f"is not this pod; not scraped, it holds its last good sample until it turns stale (a pod "
                      f"whose node is lost, not yet marked NotReady, or a pod watch behind)")
            self._problem(key, pod, REASON_ADDRESS_REUSED, detail, now)
            if (key, pod.name) not in self._superseded:
                started.append(f"{key}/{pod.name}: {detail}")
        if started:
            log.warning("%d pod(s) not scraped, their address taken by a newer pod: %s", len(started),
                        few(started, sep="; ", more="; and {} more"))
        self._superseded = noted
        return taken

    def _note_without_exporter(self, pods: list[tuple[RuntimeKey, PodTarget]], now: float) -> None:
        """Keep, for /debug, the Ready pods that run no exporter, and say once when a runtime first has one:
        its values stay unknown (503) until the sidecar is added, which is right for a runtime nobody scales."""
        before = self._without_exporter
        found: dict[RuntimeKey, dict[str, SourceProblem]] = {}
        for key, pod in pods:
            port = pod.undeclared_exporter_port
            if port is None or not pod.ready:
                continue
            known = before.get(key, {}).get(pod.name)
            found.setdefault(key, {})[pod.name] = known or SourceProblem(
                REASON_NO_EXPORTER,
                f"pod {pod.name} declares container ports but not the exporter's {port}: it runs no "
                f"modelmesh-exporter sidecar, so it is not scraped (add the sidecar to scale this runtime: "
                f"manifests/examples/exporter-sidecar-patch.yaml)", now, pod.name)
        new = {key: problems for key, problems in found.items() if key not in before}
        if len(new) <= NAMED:
            for key, problems in new.items():
                log.warning("%s: %d Ready pod(s) run no exporter sidecar (%s): not scraped, so the runtime's values "
                            "stay unknown until it is added; fine for a runtime no HPA scales", key, len(problems),
                            _one_detail(problems))
        else:  # a fleet where few runtimes are scaled: one line, not one a runtime (500 at the first refresh)
            log.warning("%d runtimes have Ready pods that run no exporter sidecar (%d pods): %s; not scraped, so "
                        "their values stay unknown until it is added; fine for a runtime no HPA scales (e.g. %s)",
                        len(new), sum(map(len, new.values())), few(list(new)), _one_detail(next(iter(new.values()))))
        self._without_exporter = found

    def _problem(self, key: RuntimeKey, pod: PodTarget, reason: str, detail: str,
                 now: float) -> SourceProblem | None:
        """Record what fails for the pod now (for /debug), failing since its first problem of this spell;
        returns the problem it had before, if any."""
        failing = self._failing.setdefault(key, {})
        before = failing.get(pod.name)
        failing[pod.name] = ongoing_problem(before, reason, detail, now, pod.name)
        return before

    def _failed(self, key: RuntimeKey, pod: PodTarget, reason: str, detail: str, now: float, cost_s: float,
                told: str | None = None) -> None:
        """Count and record a failed scrape that took `cost_s` (`ScrapeRetries`: only a slow one is backed off);
        said when its streak starts and when its reason changes (a lost pod's exporter refusing, then its IP
        answering for another pod: `other_pod` is news of its own). `told`: what /debug says where it is not the
        log's `detail` (`FetchError.told`)."""
        self.errors[reason] += 1
        before = self._problem(key, pod, reason, detail if told is None else told, now)
        started = self._retries.failed(_streak(key, pod), now, reason, cost_s) == 1
        if started or (before is not None and before.reason != reason):
            self._news.failed(f"{key}/{pod.name}", reason, detail)

    def _note_clock(self, pod: _PodKey, offset: float) -> None:
        """Log when a pod's exporter clock is found off (and by how much, when that moves by a second or more),
        and when it agrees again: its times are read on its own clock meanwhile (`read_exporter_text`)."""
        logged = self._clock_offsets.get(pod)
        if offset == 0.0:
            if logged is not None:
                del self._clock_offsets[pod]
                self._news.clock_ok(f"{pod[0]}/{pod[1]}")
            return
        if logged is None or abs(offset - logged) >= 1.0:
            self._clock_offsets[pod] = offset
            self._news.clock_off(f"{pod[0]}/{pod[1]}", offset)

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
        known = {(key, name) for key, name, _ in listed}
        for held in [held for held in self._last_good if held not in listed]:
            del self._last_good[held]
        self._pending_rates.forget_all_but(listed)
        for entry in [entry for entry in self._clock_offsets if entry not in known]:
            del self._clock_offsets[entry]
        # A pod gone, or no longer scraped (not Ready): its failure, and the unread-ness of a sample no longer read.
        # Most refreshes have neither to keep: the set of every scraped pod (41 M instructions at 10,000 pods,
        # docs/performance.md) is built only when there is.
        if self._failing or self._models_unread:
            scraped = {_pod_id(key, pod) for key, pod in pods if pod.ready and pod.url is not None}
            _keep_only(self._failing, {(key, name) for key, name, _ in scraped})
            _keep_only(self._models_unread, {(key, (name, uid)) for key, name, uid in scraped})
        self._retries.forget_all_but(_streak(key, pod) for key, runtime in inventory.items() for pod in runtime.pods)

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        """What fails now, for /debug: discovery out of date (its errors of the runtime's namespace), each of the
        runtime's pods whose last scrape failed, with its error and the time its run of failures began (a pod
        waiting out its backoff included), the pods whose sample, read or held, has per-model use unread
        (`_note_models_unread`), and its Ready pods that run no exporter."""
        return (self._discovery_outage.problems(key.namespace) + tuple(self._failing.get(key, {}).values())
                + tuple(self._models_unread.get(key, {}).values())
                + tuple(self._without_exporter.get(key, {}).values()))

    def scrape_urls(self, key: RuntimeKey) -> dict[str, str | None]:
        """Each of the runtime's pods' exporter URL, as the last refresh listed it (None where the pod is not
        scraped: no exporter declared, no IP yet), by pod name: /debug shows it for every pod, healthy or not,
        so that the scheme each was scraped over (`--exporter-scheme auto`: its port's name) can be checked.
        Asked once a refresh by the /debug render, never on the metric answers' path."""
        runtime = self._inventory.get(key)  # a targets file's `user:password@` shown as `***`, as logs show it
        return {} if runtime is None else {pod.name: _shown(pod) for pod in runtime.pods}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _keep_only(by_runtime: dict[RuntimeKey, dict[_Pod, SourceProblem]], kept: set[tuple[RuntimeKey, _Pod]]) -> None:
    """Drop the problems of pods not `kept` (by runtime and pod) from `by_runtime`, and the runtimes left without."""
    for runtime, problems in list(by_runtime.items()):
        for pod in [pod for pod in problems if (runtime, pod) not in kept]:
            del problems[pod]
        if not problems:
            del by_runtime[runtime]


def _rates_never_came(reads: int) -> str:
    """An exporter whose ModelMesh reads work but whose rates have not come after `reads` of them."""
    return (f"its exporter read ModelMesh {reads} times ({names.LAST_SUCCESS_TIMESTAMP}{MODELMESH_COLLECTOR} "
            "moved) and still publishes no request rate (a rate needs two reads), so the pod's load signals are "
            "held: the exporter's log says why (ModelMesh restarting, or reads further apart than its --load-window)")


def _shown(pod: PodTarget) -> str | None:
    """The pod's URL as the log and /debug say it: a targets file's URL may carry credentials
    (`https://user:password@host/metrics`), whose password no line shows."""
    return pod.url and without_password(pod.url)


def _streak(key: RuntimeKey, pod: PodTarget) -> tuple[RuntimeKey, str, str | None]:
    """A pod's failure streak is its URL's too: a URL fixed in the targets file (or a pod's new IP) is a new
    address, tried at once, not after the old one's backoff (up to a minute with no fresh reading)."""
    return key, pod.name, pod.url


def _pod_id(key: RuntimeKey, pod: PodTarget) -> _PodId:
    return key, pod.name, pod.uid


def _with_readiness(sample: PodSample, pod: PodTarget) -> PodSample:
    if sample.ready == pod.ready and sample.unready_since == pod.unready_since:
        return sample
    return replace(sample, ready=pod.ready, unready_since=pod.unready_since)


def _one_detail(problems: dict[str, SourceProblem]) -> str:
    """One pod's words, for a log line about all of a runtime's pods without the sidecar."""
    return next(iter(problems.values())).detail
