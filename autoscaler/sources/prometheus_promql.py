"""The PromQL `PrometheusSource` asks Prometheus (docs/design.md): pure text, no I/O; `prometheus_reader` asks it.

**One instant query per signal for all runtimes at once** (nine queries, one for the recent models and one
for the failing ModelMesh collectors, `prometheus_modelmesh_failing`, whatever the number of runtimes or pods),
aggregated `by (namespace, pod)`: `build_queries` writes them, `prometheus_reader.PrometheusReader` runs them
concurrently and indexes each answer's raw values by (namespace, pod).

Freshness. An instant query stamps every result with the *evaluation* time, not the time of the sample it
found (which may be up to the 5-minute lookback old), so the freshness query asks `timestamp()` for the
scrape time and takes, per series, the minimum of that and the exporter's own
`modelmesh_exporter_last_success_timestamp_seconds{collector="modelmesh"}`, moved onto Prometheus's clock by
the exporter's clock offset (`modelmesh_exporter_time_seconds` against its scrape time, where the exporter
reports it and it is off by more than a second), and per pod the newest of its series (a pod scraped by two
jobs is as fresh as the later scrape) that are not newer than the pod's newest scrape with signals
(`prometheus_current`): the signals are read from that scrape, so the pod is as fresh as it, not as a later
scrape of a job that keeps only the exporter's own series (whose success time passed a slow or stopped job's
signals, up to the lookback old, as fresh). A pod whose exporter reports no such series (or whose scrape with
signals has none) falls back to the scrape time of its request rate. Beside the pods' freshness, the answer has a
series for each pod whose `modelmesh_exporter_pod_info` names another pod (`prometheus_other_pod`), which the
source leaves out. The GPU signal has its own freshness query:
the exporter's `collector="gpu"` timestamp (same minimum, same scrape), or with DCGM the series' own sample times
(`DCGM_FI_DEV_GPU_UTIL` of whole GPUs, `DCGM_FI_PROF_GR_ENGINE_ACTIVE` of MIG instances). Beside the exporter's
GPU freshness, the answer has a marker series for each pod whose exporter has no GPU collector (`--no-gpu`,
`prometheus_no_gpu`), which the reader sets apart.
Those times are on Prometheus's clock; `PrometheusReader.clock_offset_s` says how far it is from the adapter's
(the round's `time()` answer against when it was asked, as the scrape source reads an exporter's clock; every
query of the round is then evaluated at that one instant, `prometheus_instant`), so
that a Prometheus node whose clock is off neither makes every pod stale nor a stale pod fresh.

Recent models. One more instant query (`build_models_query`) reads, per (namespace, pod, model_id), the time the
pod last served the model (`modelmesh_pod_model_last_served_timestamp_seconds`), moved onto Prometheus's clock by
the same exporter clock offset and kept only within `RECENT_MODELS_WINDOW_S` of Prometheus's now (in PromQL: the
answer holds only what a policy can use), plus one marker series per pod that publishes the series at all, so
that a pod that served nothing recently reads as such rather than as one that does not report per-model use. It
is not one of the signals: its failure leaves every pod's `recent_models` absent and the round good.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from autoscaler.sources.exposition import CLOCK_TOLERANCE_S
from autoscaler.sources.prometheus_current import from_newest_scrape, scraped_after_newest_scrape
from autoscaler.sources.prometheus_matchers import EVERY_SERIES, SeriesMatchers
from autoscaler.sources.prometheus_no_gpu import with_no_gpu_collectors
from autoscaler.sources.prometheus_other_pod import other_pod_series, with_other_pods
from exporter import names

GpuSource = Literal["exporter", "dcgm"]
PodRef = tuple[str, str]  # (namespace, pod)

FRESHNESS: Final = "sampled_at"
"""The field of the freshness query: when the pod's load and cache signals were sampled."""

DCGM_GR_ENGINE_ACTIVE: Final = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
"""dcgm-exporter's graphics engine activity (a ratio, in its default counters): the busy of a MIG instance, which
has no DCGM_FI_DEV_GPU_UTIL."""

DCGM_INSTANCE_LABEL: Final = "GPU_I_ID"
"""dcgm-exporter's label for a MIG GPU instance's id (absent on a whole GPU)."""

GPU_FRESHNESS: Final = "gpu_sampled_at"
"""The field of the GPU freshness query: when the pod's GPU busy was sampled (its own clock, docs/design.md:
the GPU collector can fail or hang while the ModelMesh one works)."""


@dataclass(frozen=True, slots=True)
class SignalQuery:
    """One PodSample field and the PromQL that yields it, one series per (namespace, pod)."""

    field: str
    promql: str


RECENT_MODELS: Final = "recent_models"
"""The field the models query fills."""

RECENT_MODELS_WINDOW_S: Final = 3600.0
"""How far back the models query reads last-served times: the policies read only those within their own
`target_lru_age_s` (600 s by default), which the source does not know (a runtime's annotation can set it), so a
constant bounds the answer instead; one hour covers any `target_lru_age_s` up to an hour (a longer one sees the
last hour). Each model served in it costs one series of the answer, about 150 bytes."""

def _relabel(selector: str, *moves: tuple[str, str]) -> str:
    """`selector` with each (source, target) label copied to `target` by `label_replace` (none when equal)."""
    for source, target in moves:
        if source != target:
            selector = f'label_replace({selector}, "{target}", "$1", "{source}", "(.*)")'
    return selector


def build_queries(
    gpu_source: GpuSource = "exporter",
    *,
    namespace_label: str = "namespace",
    pod_label: str = "pod",
    dcgm_namespace_label: str = "namespace",
    dcgm_pod_label: str = "pod",
    matchers: SeriesMatchers = EVERY_SERIES,
) -> tuple[SignalQuery, ...]:
    """The instant queries of one refresh, one per signal, each covering every pod Prometheus knows (or the pods
    `matchers` leave: every selector carries them).

    The exporter's signals are read only from each pod's newest scrape (`prometheus_current`: neither a series
    the newest scrape dropped nor a slower job's older sample stands in for it); `max by` then only drops the
    labels we do not join on. GPU busy is the mean over a pod's GPUs (docs/design.md). NaN survives `avg`/`max`
    of a single series, so garbage still reaches the validation in Python and is counted there.
    """
    by = f"{namespace_label}, {pod_label}"
    exporter = matchers.exporter_series
    last_success = exporter(names.LAST_SUCCESS_TIMESTAMP, f'collector="{names.COLLECTOR_MODELMESH}"')
    scraped_with_signals = exporter(names.MODELS_LOADED)  # the newest scrape that carries the signals
    gpu_success = exporter(names.LAST_SUCCESS_TIMESTAMP, f'collector="{names.COLLECTOR_GPU}"')
    offset = _exporter_clock_offset(by, matchers)

    def newest(success: str) -> str:
        """Per pod, the newest of its series' success times: each series (one per job that scrapes the pod) the
        older of its reported time, moved onto Prometheus's clock, and its scrape time; then the newest series.
        A pod scraped by a PodMonitor and by an annotation-based job at the 1-minute default is as fresh as the
        PodMonitor's last scrape: the minimum over both jobs read it as the slow job's, and every pod went stale
        once a minute (values held, 503 below `min_coverage`)."""
        moved = f"({success} - on ({by}) group_left () {offset})"
        per_series = (f'min without (freshness) (label_replace({moved}, "freshness", "reported", "", "")'
                      f' or label_replace(timestamp({success}), "freshness", "scraped", "", ""))')
        of_signal_scrapes = f"{per_series} unless {scraped_after_newest_scrape(success, by, scraped_with_signals)}"
        return f"max by ({by}) ({of_signal_scrapes})"

    if gpu_source == "dcgm":
        moves = ((dcgm_namespace_label, namespace_label), (dcgm_pod_label, pod_label))
        # Per device: a whole GPU's DCGM_FI_DEV_GPU_UTIL (percent); a MIG instance (`GPU_I_ID` set) has none, or
        # a constant 0 from older dcgm-exporters, so it and any GPU without that field read
        # DCGM_FI_PROF_GR_ENGINE_ACTIVE (a ratio), matched on the device's pod and GPU (instance).
        device = f"{dcgm_namespace_label}, {dcgm_pod_label}, gpu, {DCGM_INSTANCE_LABEL}"
        whole = matchers.dcgm_series(names.DCGM_GPU_UTIL, f'{DCGM_INSTANCE_LABEL}=""')
        active = matchers.dcgm_series(DCGM_GR_ENGINE_ACTIVE)
        busy = f"({whole} / 100 or on ({device}) {active})"
        gpu = f"avg by ({by}) ({_relabel(f'max by ({device}) {busy}', *moves)})"
        # The series' own sample times: `timestamp()` must wrap the bare selector, as it gives a sample's time
        # only for a selector; of any other expression (a `label_replace`) it gives the query's time. Per
        # device the newest (a dcgm-exporter scraped by two jobs is as fresh as the later scrape), then the
        # pod's stalest device.
        sampled = f"(timestamp({whole}) or on ({device}) timestamp({active}))"
        gpu_freshness = f"min by ({by}) ({_relabel(f'max by ({device}) {sampled}', *moves)})"
    else:
        # Not while the exporter says its GPU collector fails: the series left are the GPUs that still answer
        # (a lost one's are dropped), whose mean is not the pod's busy; a job that says so is enough.
        gpu_collector = exporter(names.COLLECTOR_SUCCESS, f'collector="{names.COLLECTOR_GPU}"')
        failing = f"min by ({by}) ({gpu_collector}) == 0"
        busy = from_newest_scrape(exporter(names.GPU_BUSY_RATIO), by, scraped_with_signals)
        gpu = (f"avg by ({by}) (max by ({by}, {', '.join(names.GPU_LABELS)}) ({busy}))"
               f" unless on ({by}) ({failing})")
        # Beside it, the pods whose exporter has no GPU collector (`prometheus_no_gpu`): their GPU is absent.
        gpu_freshness = with_no_gpu_collectors(newest(gpu_success), matchers, by)
    # A pod whose exporter reports no success time: the newest scrape of its request rate.
    freshness = f"{newest(last_success)} or max by ({by}) (timestamp({exporter(names.REQUESTS_PER_SECOND)}))"
    # Beside it, the pods whose exporter names another pod (`prometheus_other_pod`): left out, not read as theirs.
    freshness = with_other_pods(freshness, other_pod_series(matchers, namespace_label=namespace_label,
                                                            pod_label=pod_label))

    def signal(series: str) -> str:
        return f"max by ({by}) ({from_newest_scrape(exporter(series), by, scraped_with_signals)})"

    return (
        SignalQuery(FRESHNESS, freshness),
        SignalQuery("gpu_busy", gpu),
        SignalQuery("requests_per_second", signal(names.REQUESTS_PER_SECOND)),
        SignalQuery("queue_delay_s", signal(names.QUEUE_DELAY_SECONDS)),
        SignalQuery("cache_misses_per_second", signal(names.CACHE_MISSES_PER_SECOND)),
        SignalQuery("lru_age_s", signal(names.LRU_AGE_SECONDS)),
        SignalQuery("cache_used_ratio", signal(names.CACHE_USED_RATIO)),
        SignalQuery("models_loaded", signal(names.MODELS_LOADED)),
        SignalQuery(GPU_FRESHNESS, gpu_freshness),
    )


def _exporter_clock_offset(by: str, matchers: SeriesMatchers) -> str:
    """The exporter's clock against Prometheus's, per pod: its `modelmesh_exporter_time_seconds` less that
    sample's scrape time, where more than CLOCK_TOLERANCE_S apart (as the scrape source judges it), else 0
    (also for an exporter that does not report its clock). Each reported time is moved by it onto
    Prometheus's clock, so that a node clock that is off does not make its data look stale or fresh."""
    clock = matchers.exporter_series(names.EXPORTER_TIME)
    skew = f"max by ({by}) ({clock} - timestamp({clock}))"
    return (f"(({skew} > {CLOCK_TOLERANCE_S:g}) or ({skew} < -{CLOCK_TOLERANCE_S:g}) "
            f"or (max by ({by}) ({matchers.exporter_series(names.LAST_SUCCESS_TIMESTAMP)}) * 0))")


def build_models_query(window_s: float = RECENT_MODELS_WINDOW_S, *, namespace_label: str = "namespace",
                       pod_label: str = "pod", matchers: SeriesMatchers = EVERY_SERIES) -> str:
    """Per (namespace, pod, model_id) the pod's last-served time on Prometheus's clock, within `window_s` of
    Prometheus's now, and per pod publishing the series a marker without `model_id` (value 0).

    A pod whose ModelMesh has run no request declares the family with no sample, of which Prometheus keeps
    nothing: its marker comes from the recency horizon the exporter publishes wherever it reports per-model use.
    Without it, idle pods read as "per-model use missing" and held a runtime whose traffic stopped at its old
    cache proposal.

    `max by` collapses duplicates (a pod scraped by two jobs) and drops the target labels; the exporter's clock
    offset moves the times as it moves the freshness times (a pod without the offset's series, no
    `last_success_timestamp`, keeps its times as they are). NaN and negative times fail the window's comparison;
    +Inf passes it and is left to `samples.valid_value`, as any garbage is."""
    by = f"{namespace_label}, {pod_label}"
    last_served = matchers.exporter_series(names.MODEL_LAST_SERVED_TIMESTAMP)
    served = f"max by ({by}, {names.MODEL_ID_LABEL}) ({last_served})"
    moved = f"({served} - on ({by}) group_left () {_exporter_clock_offset(by, matchers)})"
    horizon = matchers.exporter_series(names.MODEL_RECENCY_HORIZON)
    return (f"(({moved} or {served}) >= (time() - {window_s:g})) "
            f"or (max by ({by}) ({last_served}) * 0) or (max by ({by}) ({horizon}) * 0)")
