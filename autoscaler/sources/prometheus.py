"""`PrometheusSource`: every runtime's per-pod signals, read from Prometheus (docs/design.md).

Where a cluster outgrows direct scraping, Prometheus (or Thanos, Mimir) already holds the exporters' series.
Each refresh asks it one instant query per signal for all runtimes at once (`prometheus_promql`: the PromQL;
`prometheus_reader`: the HTTP calls and the checks on the answers' shape) and joins the answers to discovery's
inventory here.
Readiness, replicas and annotations come from discovery, never from Prometheus. A pod with no freshness
series was not seen this refresh and keeps its last good sample (`prometheus_pods`: each pod's sample, and what is
held of it).

Errors are owned here (the one exception, `PrometheusSourceError` from `prometheus_answers`, carries a
`reason` and chains the library's exception as its cause; it never leaves `collect()`):

- the backend fails as a whole (connection refused, timeout, HTTP error, a body that is not the expected
  JSON, or no series at all for the inventory's pods while Ready pods exist, `prometheus_round_pods`): every
  snapshot of that refresh says `source_ok=False` and carries each pod's **last good** `PodSample`, never zeros,
  so the policies hold.
  No series at all right after answers that had them is no outage for up to HOLD_LIMIT_S
  (`prometheus_empty_answer`): asked again at once, then every pod's last sample held with `source_ok` True,
  the likely causes logged once per run; past the limit it is the outage, saying them.
  The failure is logged once per outage with the backend's detail, and again when it recovers, flaps counted
  rather than logged and each new kind of failure said once (`prometheus_news`: when, and why).
- one series is garbage (NaN, ±Inf, negative, unparseable): only that pod's signal is absent (None), the
  refresh is still good (a garbled freshness series holds the pod's last good sample). Logged once per pod and
  signal until it is good again, and a `garbage` problem of the pod in /debug meanwhile (`problems`), naming
  each series and its value, as a value above its signal's ceiling is (which holds the whole reading).
- the answers say they are partial (Thanos Query's `warnings` about stores it could not reach, VictoriaMetrics'
  `isPartial`): the refresh is good, the pods they leave out hold their last good samples as any pod missing from
  an answer does (and turn stale). Logged once per set of warnings, and when the answers are complete again;
  not an error, but counted (`partial_answers`, one per refresh) and, for the runtimes with a Ready pod missing
  from them, a `partial` problem in /debug (`problems`; `prometheus_partial`).
- a Ready pod has no series while others of its runtime have them: named in the log once it is `max_staleness_s`
  old (and when it has series again), an `unseen` problem of the pod in /debug meanwhile (`prometheus_missing_pods`);
  not an error. So is a signal's series Prometheus stopped having for a Ready pod whose other series it has (a
  relabelling that drops it), named with the series (`prometheus_dropped_series`).
- none of a runtime's Ready pods has series for UNSEEN_WARN_AFTER_S while other runtimes' pods have them
  (its namespace left out of what Prometheus scrapes): logged once, naming the runtime; not an error
  (`prometheus_unseen`).
- with `--gpu-source dcgm`, no DCGM series names any pod Prometheus has series for for UNSEEN_WARN_AFTER_S
  (dcgm-exporter without `--kubernetes`): logged once, saying what to set; not an error (`prometheus_dcgm`).

- a pod's series come from another pod's exporter (its `modelmesh_exporter_pod_info` names another pod:
  Prometheus's target for it reached another pod, `prometheus_other_pod`): the pod is left out as missing data
  (its last good sample held, as the scrape source refuses such an answer), counted as `other_pod` every refresh,
  logged when it starts and ends, and an `other_pod` problem of the pod in /debug meanwhile.

- a Ready pod's exporter says its ModelMesh collector fails after a good read (ModelMesh broke; the exporter serves
  that read's values, which turn stale as ever), or that it never read ModelMesh (a wrong --modelmesh-url, a CA
  that does not sign ModelMesh's certificate: no load series at all, no values): one more query a refresh finds
  those pods, and each is a `garbage` problem of the pod in /debug in the scrape source's words, counted every
  refresh, logged when it starts and ends (one never read: once it is `max_staleness_s` old, as a missing pod is);
  it is not also a missing pod, an unseen runtime or, for a whole fleet, an `empty` outage
  (`prometheus_modelmesh_failing`). That query's failure is counted by its reason and said at debug level only.

- a refresh shows what Prometheus's `--query.lookback-delta` or the exporters' scrape interval would cause (no
  series, a pod's series gone, a stale sample; `prometheus_round_pods.pod_to_check`): `prometheus_lookback`
  measures both once and says what does not fit; not an error.

- the recent-models query alone fails: the refresh is good, every pod read this refresh has `recent_models` None
  (the unique-copy term drops out; nothing is lowered for it). Counted by its reason, logged once until it
  answers again. A garbled last-served time drops that model (counted as `garbage`, logged once per pod).

The first two and the recent-models query's failures (and its garbled times) are counted in `errors` by
reason, and passed to the optional `on_error` callback (self-metrics); partial answers and unseen runtimes
are not.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from urllib3.util.retry import Retry

from autoscaler.forgetting import RecreatedRuntimes
from autoscaler.model import RuntimeKey, RuntimeSnapshot
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.source_problems import for_every_runtime
from autoscaler.sources.base import (
    ALL_NAMESPACES,
    DiscoveryOutage,
    DiscoveryScopes,
    PodDiscovery,
    RuntimeInventory,
    SourceDefaults,
    SourceProblem,
)
from autoscaler.sources.prometheus_answers import REASON_EMPTY, PrometheusSourceError
from autoscaler.sources.prometheus_current import NEWEST_SCRAPE_SERIES
from autoscaler.sources.prometheus_dcgm import DcgmUnmatched
from autoscaler.sources.prometheus_dropped_series import DroppedSeries
from autoscaler.sources.prometheus_empty_answer import EmptyAfterGood
from autoscaler.sources.prometheus_garbage import PrometheusGarbage
from autoscaler.sources.prometheus_lookback import LookbackCheck
from autoscaler.sources.prometheus_matchers import SeriesMatchers, promql_string
from autoscaler.sources.prometheus_missing_pods import MissingPods
from autoscaler.sources.prometheus_modelmesh_failing import ModelMeshFailing, modelmesh_failing_query
from autoscaler.sources.prometheus_news import FLAP_QUIET_S, PrometheusNews
from autoscaler.sources.prometheus_other_pod import OtherPods
from autoscaler.sources.prometheus_partial import PartialAnswers
from autoscaler.sources.prometheus_pods import PodReadings
from autoscaler.sources.prometheus_promql import (
    RECENT_MODELS_WINDOW_S,
    GpuSource,
    PodRef,
    build_models_query,
    build_queries,
)
from autoscaler.sources.prometheus_reader import PrometheusReader
from autoscaler.sources.prometheus_round_pods import pod_to_check, seen_pods
from autoscaler.sources.prometheus_unseen import UnseenRuntimes
from autoscaler.sources.prometheus_vectors import Answers
from exporter.flag_values import without_password

log = logging.getLogger(__name__)


class PrometheusSource(SourceDefaults):
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
        token_file: Path | None = None,
        retry: Retry | None = None,
        namespace_label: str = "namespace",
        pod_label: str = "pod",
        dcgm_namespace_label: str = "namespace",
        dcgm_pod_label: str = "pod",
        series_selector: Sequence[str] = (),
        on_error: Callable[[str], None] | None = None,
        recent_models_window_s: float | None = RECENT_MODELS_WINDOW_S,
        max_staleness_s: float = RuntimePolicy().max_staleness_s,
    ) -> None:
        """`url` is Prometheus's base URL (no `/api/v1`); `timeout_s` bounds each HTTP request.

        urllib3 does not retry (`retry`, default `Retry(total=0, read=False)`, replaces the library's
        default of seconds of backoff, and its per-retry warnings); this class retries a refused connection
        once after 0.1 s and never a timeout (a slow Prometheus does not get faster), so a dead backend
        costs a refresh at most about 2 * `timeout_s`. `verify` is False, True or a CA bundle path;
        `headers` (e.g. Authorization) go with every request, and so does `Authorization: Bearer` with the
        token in `token_file`, read again whenever the file changes (the kubelet rotates projected tokens).
        `namespace_label`/`pod_label` name the labels
        Prometheus puts on the exporters' series (a PodMonitor's defaults); `dcgm_namespace_label`/
        `dcgm_pod_label` those that name the pod on DCGM's series (`exported_pod` where Prometheus does not
        honour the DCGM exporter's labels). `series_selector` holds PromQL label matchers
        (`prometheus_matchers.parse_matchers`) that every selector of the exporters' series carries: the jobs
        trusted to write them. Every selector also names the namespaces discovery reads, where it reads some
        (`namespaces_read`). `on_error(reason)` is called
        for every counted error (self-metrics). `recent_models_window_s` bounds how far back the models query
        reads last-served times (None: not asked, every pod's `recent_models` None). `max_staleness_s` is the
        default policy's, which the exporters' scrape interval is checked against (`prometheus_lookback`). The
        discovery stays the caller's to close.
        """
        self._discovery = discovery
        self._url = without_password(url.rstrip("/"))  # for logs only
        self._clock = clock
        self._on_error = on_error
        self._ns_label = namespace_label
        self._pod_label = pod_label
        self._gpu_source = gpu_source
        self._dcgm_unmatched = DcgmUnmatched(self._url, (dcgm_namespace_label, dcgm_pod_label))
        matchers = SeriesMatchers.of(series_selector, namespaces_read(discovery), namespace_label=namespace_label,
                                     dcgm_namespace_label=dcgm_namespace_label)
        self._matchers = matchers
        self._signals = build_queries(gpu_source, namespace_label=namespace_label, pod_label=pod_label,
                                      dcgm_namespace_label=dcgm_namespace_label, dcgm_pod_label=dcgm_pod_label,
                                      matchers=matchers)
        self._reader = PrometheusReader(
            url.rstrip("/"),
            self._signals,
            timeout_s=timeout_s,
            headers=headers,
            verify=verify,
            token_file=token_file,
            retry=retry,
            namespace_label=namespace_label,
            pod_label=pod_label,
            clock=clock,
            models_query=None if recent_models_window_s is None else build_models_query(
                recent_models_window_s, namespace_label=namespace_label, pod_label=pod_label, matchers=matchers),
            failing_query=modelmesh_failing_query(namespace_label=namespace_label, pod_label=pod_label,
                                                  matchers=matchers),
        )
        self._news = PrometheusNews(self._url, clock, on_error)
        self._partial = PartialAnswers(self._url)
        self._unseen = UnseenRuntimes(self._url)
        self._garbage = PrometheusGarbage(self._url, self._news.count)
        self._other_pods = OtherPods(self._url, self._news.count)
        self._pods = PodReadings(self._signals, self._reader, self._garbage, self._other_pods, self._news.count)
        self._last = self._pods.last  # each pod's last good sample, which the checks below read too
        self._modelmesh_failing = ModelMeshFailing(self._url, self._news.count, max_staleness_s)
        self._discovery_outage = DiscoveryOutage()
        self._empty = EmptyAfterGood(self._url, FLAP_QUIET_S)
        self._recreated = RecreatedRuntimes()
        self._lookback = LookbackCheck(self._url, max_staleness_s)
        self._missing = MissingPods(self._url, max_staleness_s)
        self._dropped = DroppedSeries(self._url, max_staleness_s)

    @property
    def errors(self) -> Counter[str]:
        """Failures by reason since start: whole-refresh reasons once per refresh, `garbage` per series."""
        return self._news.errors

    @property
    def last_error(self) -> PrometheusSourceError | None:
        """The failure of the outage going on; None while Prometheus answers."""
        return self._news.last_error

    @property
    def outage_since(self) -> float | None:
        """Clock time the current outage began; None while Prometheus answers."""
        return self._news.outage_since

    @property
    def partial_answers(self) -> int:
        """Refreshes answered partial so far (`modelmesh_autoscaler_source_partial_answers_total`)."""
        return self._partial.answers

    @property
    def queries(self) -> Sequence[str]:
        """The PromQL of one refresh, in order (the signals', the recent models', then the failing ModelMesh
        collectors'): for docs, dashboards and tests."""
        models = () if self._reader.models_query is None else (self._reader.models_query,)
        failing = () if self._reader.failing_query is None else (self._reader.failing_query,)
        return (*(signal.promql for signal in self._signals), *models, *failing)

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        """One snapshot per runtime in the inventory; never raises."""
        inventory = self._discovery.inventory()
        uids = ((name, runtime.uid) for name, runtime in inventory.items())
        for key in self._recreated.created_again(uids):  # another runtime: nothing of the old one is its own
            self.forget(key)
        held = False
        # One deadline for all the refresh asks Prometheus (its round, one asked again, the check's reads): the
        # stall limit (`ServeSettings.source_deadline_s`) and the late-refresh line are built on it.
        self._reader.begin_refresh()
        try:
            answers, seen = await self._read(inventory, now)
        except PrometheusSourceError as error:
            self._missing.unanswered()  # a pod's grace runs from the next answer with series
            if self._empty.holds(error, now):  # `prometheus_empty_answer`: held (for a while), not an outage
                self._news.count(error.reason)
                self._news.recovered()  # it answers (a restart on an empty TSDB ends an outage of no answers)
                self._empty.held(error, now)
                answers, seen, backend_ok, held = {}, set(), True, True
            else:
                self._news.failed(self._empty.failed(error, now))
                answers, seen, backend_ok = {}, set(), False
            reached = error.reason == REASON_EMPTY
        else:
            reached = True
            self._empty.answered(now)
            self._news.recovered()
            self._news.note_clock(self._reader.clock_offset_s)
            self._partial.note(self._reader.warnings)
            self._partial.note_runtimes(inventory, seen, now)
            self._news.note_models(self._reader.models_error)
            self._other_pods.note(inventory, self._reader.other_pods, now)
            backend_ok = True
        outage = self._discovery_outage
        self._note_discovery(outage, self._discovery, inventory, now)
        snapshots = [
            self._pods.snapshot(runtime, answers, seen, now, backend_ok, outage.healthy(key.namespace))
            for key, runtime in inventory.items()
        ]
        if reached and self._lookback.due(now):
            await self._check_scrapes(inventory, seen, now)
        if backend_ok and not held:
            self._note_failing(inventory, seen, now)
            # A pod whose exporter says it never read ModelMesh has no series for that cause, said as such.
            answered = seen | self._modelmesh_failing.never_read
            self._unseen.note(inventory, answered, now)
            if not self._reader.warnings:  # a partial answer's missing pods are `partial`'s
                self._missing.note(inventory, answered, self._reader.other_pods, self._last, now)
                self._dropped.note(inventory, answers, seen, now)
            if self._gpu_source == "dcgm":
                self._dcgm_unmatched.note(answers["gpu_busy"], seen, now)
        self._forget_vanished(inventory)
        return snapshots

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        """What fails now, for /debug: discovery out of date (its errors of the runtime's namespace); Prometheus
        failing (the same for every runtime: the backend fails as a whole), with its last error and the time the
        outage began; else, when it answers, no series for any of the runtime's Ready pods (`unseen`), or
        answers that said they were partial and left some of them out (`partial`). Prometheus's words, the same for
        every runtime, are told with their label sets cut out (`for_every_runtime`): they may name other
        namespaces' series."""
        problems = self._discovery_outage.problems(key.namespace)
        if self.last_error is not None and self.outage_since is not None:
            problems += (SourceProblem(self.last_error.reason, for_every_runtime(self.last_error.detail),
                                       self.outage_since),)
        elif (partial := self._partial.problem(key)) is not None:
            problems += (partial,)
        elif (unseen := self._unseen.problem(key)) is not None:
            problems += (unseen,)
        return (problems + self._missing.problems(key) + self._dropped.problems(key) + self._other_pods.problems(key)
                + self._garbage.problems(key) + self._modelmesh_failing.problems(key))

    async def close(self) -> None:
        """Release the HTTP connections."""
        self._reader.close()

    # ---- joining ----

    async def _read(self, inventory: Mapping[RuntimeKey, RuntimeInventory],
                    now: float) -> tuple[Answers, set[PodRef]]:
        """One round's answers and the inventory pods they have; the first empty answer right after good ones is
        asked once more at once (`prometheus_empty_answer`: behind a load balancer, another replica may answer)."""
        try:
            answers = await self._reader.read_all()
            return answers, seen_pods(answers, inventory, self._reader, namespace_label=self._ns_label,
                                  pod_label=self._pod_label)
        except PrometheusSourceError as error:
            if not self._empty.retries(error, now):
                raise
            log.debug("Prometheus answered empty after good answers; asking again at once: %s", error.detail)
        answers = await self._reader.read_all()
        return answers, seen_pods(answers, inventory, self._reader, namespace_label=self._ns_label,
                                  pod_label=self._pod_label)

    async def _check_scrapes(self, inventory: Mapping[RuntimeKey, RuntimeInventory], seen: set[PodRef],
                             now: float) -> None:
        """`prometheus_lookback` where a round that reached Prometheus shows what its settings would cause, on the
        pod `pod_to_check` names. A healthy round asks nothing more."""
        pod = pod_to_check(inventory, seen, self._last, self._other_pods, partial=bool(self._reader.warnings),
                           max_staleness_s=self._lookback.max_staleness_s, now=now)
        if pod is None:
            return
        series = self._matchers.exporter_series(  # the series with the pod's signals (`prometheus_lookback`)
            NEWEST_SCRAPE_SERIES, f"{self._ns_label}={promql_string(pod[0])}",
            f"{self._pod_label}={promql_string(pod[1])}")
        await self._lookback.run(self._reader, pod, series, now)

    def _forget_vanished(self, inventory: Mapping[RuntimeKey, RuntimeInventory]) -> None:
        """Drop memory of pods discovery no longer lists, so it stays bounded as pods come and go."""
        known = {(key.namespace, pod.name) for key, runtime in inventory.items() for pod in runtime.pods}
        self._pods.forget(known)
        self._garbage.forget(known, inventory)
        self._other_pods.forget(known)
        self._modelmesh_failing.forget(known)
        self._dropped.forget(known)
        for key in self._unseen.runtimes() - inventory.keys():
            self.forget(key)

    def forget(self, key: RuntimeKey) -> None:
        """Drop what is kept of runtime `key` itself (`autoscaler.forgetting`): it is gone, or created again (a new
        Deployment uid, `forgetting.RecreatedRuntimes`). What is kept per pod is the pod's: a new object's pods are
        other pods, and a pod no longer listed is forgotten as such (`_forget_vanished`)."""
        self._unseen.forget(key)
        self._missing.forget(key)

    def _note_failing(self, inventory: Mapping[RuntimeKey, RuntimeInventory], seen: set[PodRef], now: float) -> None:
        """The pods whose exporter cannot read ModelMesh (`prometheus_modelmesh_failing`): since a good read, by
        their held samples' times, or never (no series in `seen`); the query's failure only leaves them unsaid this
        refresh, said at debug level and counted by its reason (as a failed models query is)."""
        self._news.note_failing_query(self._reader.failing_error)
        self._modelmesh_failing.note(inventory, self._reader.failing, seen, self._reader.other_pods, self._last, now)


def namespaces_read(discovery: PodDiscovery) -> tuple[str, ...]:
    """The namespaces whose pods `discovery` can know, its scopes (`--namespaces`, and the namespace of each
    policy-file runtime outside them, whose pods are watched too); none where it reads every namespace or has
    no scopes (a targets file, whose runtimes may be anywhere). The queries ask for those pods only."""
    if not isinstance(discovery, DiscoveryScopes):
        return ()
    scopes = discovery.scope_health()
    return () if ALL_NAMESPACES in scopes else tuple(sorted(scopes))
