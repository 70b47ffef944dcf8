"""Turns one exporter's `/metrics` text into a `PodSample`.

Shared by every reader of exporter output (the scrape source; the demo's table), so the meaning of each
exporter series is decided once. Invalid values (NaN, infinities, negatives) leave the signal absent: a
garbled number must never read as "idle". A value above its signal's ceiling (`samples.CEILINGS`: a million
requests a second, an hour's queue delay) is garbage too, and never reads as a huge load: the reading has no
load data then, and says why (`ExporterReading.refused`). A garbled last-served time drops that one model from
`recent_models`; garbled times for every model the pod reports leave `recent_models` None (not reported), not
empty (which says the pod served nothing recently, and would make it the cheapest to remove), and the reading
says so (`ExporterReading.models_unread`): unlike a pod without the series, it is no evidence that ModelMesh
stopped reporting per-model use.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Final, NamedTuple

from prometheus_client.parser import text_string_to_metric_families

from autoscaler.backend_said import quoted
from autoscaler.model import PodSample
from autoscaler.policies.samples import clean, refusal
from autoscaler.sources.body_summary import body_summary
from autoscaler.sources.exporter_failures import failed_reads_said
from autoscaler.sources.exporter_text import Sample, fast_read
from autoscaler.sources.exporter_text_limits import over_limit
from autoscaler.sources.modelmesh_own_port import modelmesh_own_metrics
from exporter import names
from exporter.pod_identity import PodIdentity


class ExpositionError(ValueError):
    """The text is not Prometheus exposition from our exporter."""


SCALAR_FIELDS = {
    names.REQUESTS_PER_SECOND: "requests_per_second",
    names.QUEUE_DELAY_SECONDS: "queue_delay_s",
    names.CACHE_MISSES_PER_SECOND: "cache_misses_per_second",
    names.LRU_AGE_SECONDS: "lru_age_s",
    names.CACHE_USED_RATIO: "cache_used_ratio",
    names.MODELS_LOADED: "models_loaded",
}


WINDOWED: Final = frozenset({names.REQUESTS_PER_SECOND, names.QUEUE_DELAY_SECONDS, names.CACHE_MISSES_PER_SECOND})
"""The series the exporter computes over its load window, which it publishes all together from its second
ModelMesh read on (`exporter.counters.CounterWindow.rates`), and none of before."""

_INF: Final = math.inf

_MODELS_DECLARED: Final = f"# TYPE {names.MODEL_LAST_SERVED_TIMESTAMP} "
"""How an exporter that reports per-model use but served nothing recently says so: the family, without samples."""


def library_samples(text: str) -> Iterator[Sample]:
    """Every sample, read by `prometheus_client`'s parser: the reference reading of any exposition."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            yield sample.name, sample.labels, sample.value


def modelmesh_failed_reads(text: str) -> str:
    """The exporter's failed ModelMesh reads by reason, for a person (`failed_reads_said`), read by the library's
    parser: only from an exporter that says its collector fails, never on a good scrape's path. Text the parser
    refuses names no reason."""
    modelmesh = names.COLLECTOR_MODELMESH
    try:
        counts = sorted((labels["reason"], value) for name, labels, value in library_samples(text)
                        if name == names.SCRAPE_ERRORS_TOTAL and labels.get("collector") == modelmesh
                        and "reason" in labels)
    except ValueError:
        counts = []
    return failed_reads_said(counts)


CLOCK_TOLERANCE_S: Final = 1.0
"""An exporter clock that reads within this of the scrape (from the adapter sending it to reading the answer)
counts as the adapter's own: its timestamps are read as they are (`clock_offset`)."""


def clock_offset(exporter_now: float, requested_at: float, scraped_at: float) -> float:
    """How far the exporter's clock is ahead of the adapter's, from the time it reported while answering a
    scrape sent at `requested_at` and read by `scraped_at` (adapter's clock): 0 when the report falls inside
    that interval, give or take `CLOCK_TOLERANCE_S` (a slow scrape is not a clock that is off). Otherwise it is
    measured from the send, which errs by at most the scrape's duration and always towards older data: the
    times moved by it are never fresher than they were."""
    if requested_at - CLOCK_TOLERANCE_S <= exporter_now <= scraped_at + CLOCK_TOLERANCE_S:
        return 0.0
    return exporter_now - requested_at


class ExporterReading(NamedTuple):
    sample: PodSample
    clock_offset_s: float
    """How far the exporter's clock is ahead of the adapter's (negative: behind) as its
    `modelmesh_exporter_time_seconds` showed at the scrape; 0 when `clock_offset` finds none or the exporter
    does not report its clock (one from before the series: its timestamps are read as they are, as always)."""
    pod: PodIdentity | None = None
    """The pod the exporter says it runs in (`modelmesh_exporter_pod_info`); None when it names none (one from
    before the series, or a sidecar not given the downward API's variables), which is read as always."""
    refused: str | None = None
    """Why the reading is not believed, when a value is above its signal's ceiling (`samples.CEILINGS`): then
    `sample` has no load data (and no GPU busy, where that was the value), for the source to hold the pod's
    last good sample and say so."""
    models_unread: bool = False
    """The exporter published last-served times, every one of them garbage (NaN, negative, +Inf): `recent_models`
    is None as for an exporter without the series, but this is no evidence that ModelMesh stopped reporting
    per-model use, so the source says so on the runtime's snapshot (`RuntimeSnapshot.models_unread`)."""
    rates_pending: bool = False
    """The exporter published none of its windowed rates (`WINDOWED`), nor a value above a ceiling: its ModelMesh
    collector has not read twice since the exporter started (a rate needs two reads; a new pod, a sidecar
    restarted), or since ModelMesh restarted or a gap longer than its load window (it says so in its own log).
    `sample` has no load data then, and that is no garbage: the pod is not fresh yet, as before its first read.
    A rate that is there but NaN, infinite or negative, or missing beside the other rates, is garbage. Never
    while its ModelMesh collector fails (`modelmesh_failing`): that exporter has no rate for good.
    The source bounds the wait (`pending_rates`): rates should come at its second read."""
    modelmesh_failing: bool = False
    """The exporter has no rates and says its ModelMesh collector failed at its last attempt
    (`collector_success{collector="modelmesh"} 0` after an attempt, which `collector_duration_seconds` shows):
    a wrong --modelmesh-url, a CA that does not sign ModelMesh's certificate, ModelMesh down. Not a pod before
    its second read: one whose reads never work publishes no rates either, and would be held unsaid for ever."""
    modelmesh_read_at: float | None = None
    """The exporter's last good ModelMesh read, on its own clock as it published it (not moved by the clock
    offset, whose measure varies from one scrape to the next: one read keeps one time), where `sample` has no
    load data; for the source to count the reads an exporter with `rates_pending` has made without a rate."""
    modelmesh_failures: str | None = None
    """Where the exporter has load data but says its ModelMesh collector failed at its last attempt (ModelMesh
    broke after a good read: the exporter keeps serving that read's values, with its time): its failed reads by
    reason, as it counts them (`modelmesh_failed_reads`); None otherwise. The values are the pod's as ever (they
    turn stale by their time), but the source says why they stopped moving (`ScrapeSource`)."""


def read_exporter_text(text: str, pod: str, ready: bool, scraped_at: float,
                       created_at: float | None = None, requested_at: float | None = None) -> ExporterReading:
    """Read the signals of one pod.

    `sampled_at` is the exporter's own last good ModelMesh collection time when it reports one (a failing exporter
    keeps serving old values with an old timestamp, which is how staleness is noticed), and `gpu_sampled_at` its last
    good GPU collection time (no GPU signal at all while the exporter says its GPU collector fails: what it still
    serves is the GPUs that answer, not the pod). Both are on the node's clock. Where the exporter also reports that
    clock at the scrape (`modelmesh_exporter_time_seconds`) and it is off the adapter's (`clock_offset`; the scrape
    was sent at `requested_at`, default `scraped_at`, and read by `scraped_at`), both are moved by the offset, so that
    a node clock a minute behind does not make every sample look a minute old (a pod stale for good, its runtime never
    scaled down), nor one ahead make a hung collector look fresh. Both are then capped at the scrape time: data never
    looks fresher than the scrape that read it.
    """
    _refuse_non_exposition(text)
    tally = _tally(text)
    if not tally.seen_exporter:
        raise ExpositionError(modelmesh_own_metrics(text) or "no modelmesh exporter metrics in the response")
    return _reading(tally, text, pod, ready, scraped_at, created_at,
                    scraped_at if requested_at is None else requested_at)


def _refuse_non_exposition(text: str) -> None:
    """Raise for a body that cannot be our exporter's exposition: a web page (said by its title, for the
    operator to find what answers at the exporter's address), or text cut short."""
    start = text[:1]
    if start == "<" or (start.isspace() and text.lstrip()[:1] == "<"):  # no exposition starts so; a web page does
        raise ExpositionError(f"{body_summary(text, 'text/html')}, not the exporter's metrics: a login proxy, an "
                              "ingress or another service answering at that address? Check the pod's exporter port "
                              "and path")
    if not text.endswith("\n"):
        raise ExpositionError("truncated exposition (no final newline)")


class _Tally(NamedTuple):
    """What one exposition says, each series as `_tally` found it, before any rule of `_reading` applies."""

    values: dict[str, float]
    """The usable scalar signals, by `PodSample` field (`SCALAR_FIELDS`)."""
    gpu_busy: list[float]
    refused: list[str]
    """The values above their ceilings, said as `samples.refusal` says them."""
    gpu_refused: bool
    modelmesh_ok_at: float | None
    gpu_ok_at: float | None
    gpu_failing: bool
    collectors_listed: bool
    gpu_listed: bool
    """With `collectors_listed`: whether the exporter runs a GPU collector at all (`no_gpu_collector`)."""
    exporter_now: float | None
    pod_named: PodIdentity | None
    horizon: float | None
    seen_exporter: bool
    modelmesh_success: float | None
    """`collector_success{collector="modelmesh"}`."""
    modelmesh_tried: bool
    """Its `collector_duration_seconds` is there: the collector has made an attempt."""
    windowed: bool
    """Any of `WINDOWED` in the text, usable or not (`ExporterReading.rates_pending`)."""
    models: dict[str, float]
    model_samples: int


def _tally(text: str) -> _Tally:
    """Every sample of `text` sorted into what `_reading` judges. The scrape's hot loop, whole in one function:
    one call per exposition, none per sample (a pod with per-model metrics has thousands)."""
    values: dict[str, float] = {}
    gpu_busy: list[float] = []
    refused: list[str] = []
    gpu_refused = False
    modelmesh_ok_at: float | None = None
    gpu_ok_at: float | None = None
    gpu_failing = False
    collectors_listed = gpu_listed = False
    exporter_now: float | None = None
    pod_named: PodIdentity | None = None
    horizon: float | None = None
    seen_exporter = False
    modelmesh_success: float | None = None
    modelmesh_tried = False
    windowed = False
    models: dict[str, float] = {}
    model_samples = 0
    model_series, model_label, intern = names.MODEL_LAST_SERVED_TIMESTAMP, names.MODEL_ID_LABEL, sys.intern
    fast = fast_read(text)  # never raises: it reads what it knows for certain, else gives up (None)
    if fast is None and (problem := over_limit(text)) is not None:  # the library's parser: bounded cost
        raise ExpositionError(problem)
    try:
        for name, labels, value in library_samples(text) if fast is None else fast[0]:
            if name == model_series:  # first: with per-model metrics, all but a dozen samples are these
                model_samples += 1
                model = labels.get(model_label)
                if model and 0.0 <= value < _INF:  # `clean`'s rule, inline: this runs for every model
                    # Interned: every pod and every refresh names the same few models; one string each.
                    models[intern(model)] = value
            elif name == names.GPU_BUSY_RATIO:
                seen_exporter = gpu_listed = True
                if clean(value) is not None:
                    if (why := refusal("gpu_busy", value, name)) is None:
                        gpu_busy.append(min(1.0, value))
                    else:
                        refused.append(why)
                        gpu_refused = True
            elif name in SCALAR_FIELDS:
                seen_exporter = True
                windowed = windowed or name in WINDOWED
                if clean(value) is not None:
                    if (why := refusal(SCALAR_FIELDS[name], value, name)) is None:
                        values[SCALAR_FIELDS[name]] = value
                    else:
                        refused.append(why)
            elif name == names.LAST_SUCCESS_TIMESTAMP:
                seen_exporter = True
                collector = labels.get("collector")
                if clean(value) is not None and collector == names.COLLECTOR_MODELMESH:
                    modelmesh_ok_at = value
                elif collector == names.COLLECTOR_GPU:
                    gpu_listed = True
                    if clean(value) is not None:
                        gpu_ok_at = value
            elif name == names.COLLECTOR_SUCCESS:
                seen_exporter = collectors_listed = True
                if labels.get("collector") == names.COLLECTOR_MODELMESH:
                    modelmesh_success = value
                elif labels.get("collector") == names.COLLECTOR_GPU:
                    gpu_listed = True
                    if value == 0.0:
                        gpu_failing = True
            elif name == names.COLLECTOR_DURATION_SECONDS:
                modelmesh_tried = modelmesh_tried or labels.get("collector") == names.COLLECTOR_MODELMESH
            elif name == names.EXPORTER_TIME:
                exporter_now = clean(value)
            elif name == names.POD_INFO:
                pod_named = PodIdentity.from_labels(labels)
            elif name == names.MODEL_RECENCY_HORIZON:
                horizon = clean(value)
    except (ValueError, TypeError, IndexError, KeyError) as error:
        raise ExpositionError(f"unparseable exposition: {quoted(str(error))}") from error  # the text's own words
    if fast is not None and fast[1]:
        model_samples += len(fast[1])
        _add_models(models, fast[1], fast[2])
    # In field order, not by keyword: 18 keywords cost a read 4% more instructions (bench_exporter_text.py).
    return _Tally(values, gpu_busy, refused, gpu_refused, modelmesh_ok_at, gpu_ok_at, gpu_failing, collectors_listed,
                  gpu_listed, exporter_now, pod_named, horizon, seen_exporter, modelmesh_success, modelmesh_tried,
                  windowed, models, model_samples)


def _reading(tally: _Tally, text: str, pod: str, ready: bool, scraped_at: float, created_at: float | None,
             requested_at: float) -> ExporterReading:
    """The pod's reading from what its exposition says (`read_exporter_text` says the rules)."""
    offset = 0.0
    if tally.exporter_now is not None:
        offset = clock_offset(tally.exporter_now, requested_at, scraped_at)
    modelmesh_ok_at, gpu_ok_at = tally.modelmesh_ok_at, tally.gpu_ok_at
    modelmesh_read_at = modelmesh_ok_at  # on the exporter's clock: the same read keeps its time at each scrape
    if offset:
        modelmesh_ok_at = None if modelmesh_ok_at is None else modelmesh_ok_at - offset
        gpu_ok_at = None if gpu_ok_at is None else gpu_ok_at - offset
    # The GPU signal has its own freshness (the GPU collector can fail or hang while ModelMesh's works):
    # without a GPU timestamp, GPU series cannot be judged fresh, so they are left out. Nor while the exporter
    # says its GPU collector fails: the series left are the GPUs that still answer (a lost one's are dropped),
    # whose mean is not the pod's busy (a 90%-busy GPU off the bus read the pod as its idle neighbour's 5%).
    # A GPU busy above its ceiling is not the pod's either, nor the mean of the GPUs left without it.
    gpu_busy = tally.gpu_busy
    gpu = (sum(gpu_busy) / len(gpu_busy) if gpu_busy and gpu_ok_at is not None and not tally.gpu_failing
           and not tally.gpu_refused else None)
    gpu_at = min(gpu_ok_at, scraped_at) if gpu is not None and gpu_ok_at is not None else None
    # An exporter that lists its collectors' successes and no "gpu" among them was started with `--no-gpu`: every
    # exporter with its GPU collector on publishes `collector_success{collector="gpu"}` from its start (0 until
    # the first good pass, 0 while it fails), so a reading late or failing is never taken for no GPU.
    no_gpu_collector = tally.collectors_listed and not tally.gpu_listed
    refused, windowed = tally.refused, tally.windowed
    if modelmesh_ok_at is None or "requests_per_second" not in tally.values or refused:
        # No ModelMesh collection yet, or only one (a rate needs two: no rate series at all, `rates_pending`),
        # or a collector that fails (`modelmesh_failing`), or a rate that is garbage: no load data to offer.
        # Reporting the pod as fresh without a rate would let it count as idle. A value above its ceiling: the
        # reading is garbage, and none of its load signals is believed (the source holds the last good ones).
        failing = not windowed and tally.modelmesh_tried and tally.modelmesh_success == 0.0
        return ExporterReading(
            sample=PodSample(name=pod, ready=ready, sampled_at=None, gpu_busy=gpu, gpu_sampled_at=gpu_at,
                             created_at=created_at, no_gpu_collector=no_gpu_collector),
            clock_offset_s=offset,
            pod=tally.pod_named,
            refused="; ".join(refused) or None,
            rates_pending=not windowed and not refused and not failing,
            modelmesh_failing=failing and not refused,
            modelmesh_read_at=modelmesh_read_at,
        )
    sampled_at = min(modelmesh_ok_at, scraped_at)
    recent = _recent_models(tally.models, tally.model_samples, text, offset, sampled_at)
    failing = tally.modelmesh_tried and tally.modelmesh_success == 0.0
    return ExporterReading(
        sample=PodSample(
            name=pod,
            ready=ready,
            sampled_at=sampled_at,
            gpu_sampled_at=gpu_at,
            gpu_busy=gpu,
            recent_models=recent,
            recency_horizon_s=tally.horizon,
            created_at=created_at,
            no_gpu_collector=no_gpu_collector,
            gpu_held=False,  # (the source keeps a last GPU busy later: `held_gpu`)
            **tally.values,
        ),
        clock_offset_s=offset,
        pod=tally.pod_named,
        models_unread=recent is None and tally.model_samples > 0,  # samples, every time garbage
        modelmesh_failures=modelmesh_failed_reads(text) if failing else None,
    )


def _add_models(models: dict[str, float], ids: Sequence[str], values: Sequence[float]) -> None:
    """Put the fast reader's run of model samples into `models` as the loop over samples does, each one in
    turn: kept when its id is not empty and its time valid (`clean`'s rule), interned. The usual run (every
    id and time valid; its times are never NaN, `fast_read` reads only plain numbers there) is put in whole, in
    C: the same dict, as `update` inserts in order and keeps the last time of an id that repeats."""
    if min(values) >= 0.0 and max(values) < _INF and all(ids):
        models.update(zip(map(sys.intern, ids), values, strict=True))
        return
    for model, value in zip(ids, values, strict=True):
        if model and 0.0 <= value < _INF:
            models[sys.intern(model)] = value


def _recent_models(models: dict[str, float], samples: int, text: str, offset: float,
                   sampled_at: float) -> Mapping[str, float] | None:
    """The valid last-served times on the clock of `sampled_at` (moved by the exporter's clock offset, as
    `sampled_at` is, and never later than it: a model is served at an exporter read, which is no later than the
    last good one); {} for an exporter that declares the series but has no sample (nothing served recently);
    None when it does not publish the series (ModelMesh without per-model metrics), or every time is garbled."""
    if not models:
        return {} if samples == 0 and _MODELS_DECLARED in text else None
    if offset or max(models.values()) > sampled_at:
        return {model: min(at - offset, sampled_at) for model, at in models.items()}
    return models
