"""Each pod's sample from one refresh's answers (`PodReadings`), and the last good sample held of each pod.

A pod with no freshness series was not seen this refresh and keeps its last good sample; so does a pod whose
freshness is garbage, or whose answer is older than what is held (a restarted Prometheus that lost recent data).
A pod read before whose load left the answer is read for its GPU alone, beside its last good load; a pod whose GPU
busy left the answer keeps its last good GPU reading beside this refresh's load (`held_gpu`). What is held of a
pod is held for the pod object it was read of (`prometheus_pod_objects`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace

from autoscaler.model import PodSample, RuntimeSnapshot
from autoscaler.policies.samples import refusal, valid_value
from autoscaler.source_problems import REASON_GARBAGE
from autoscaler.sources.base import RuntimeInventory
from autoscaler.sources.exposition import SCALAR_FIELDS
from autoscaler.sources.held_gpu import with_gpu_read, with_last_gpu
from autoscaler.sources.prometheus_garbage import PrometheusGarbage
from autoscaler.sources.prometheus_other_pod import OtherPods
from autoscaler.sources.prometheus_pod_objects import HeldFor, of_this_pod
from autoscaler.sources.prometheus_promql import FRESHNESS, GPU_FRESHNESS, RECENT_MODELS, PodRef, SignalQuery
from autoscaler.sources.prometheus_reader import PrometheusReader
from exporter import names

_SERIES = {field: series for series, field in SCALAR_FIELDS.items()} | {
    "gpu_busy": "GPU busy",
    FRESHNESS: f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="{names.COLLECTOR_MODELMESH}"}}',
    GPU_FRESHNESS: f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="{names.COLLECTOR_GPU}"}}',
}
"""The series a signal is read from, as /debug and the refusal of a value above its ceiling name it."""


def _older(sample: PodSample, previous: PodSample | None) -> bool:
    """True when `sample` describes an earlier time than the one we hold (a restarted Prometheus that lost
    recent data answers with older samples): a source never moves a pod's data back in time."""
    if previous is None or previous.sampled_at is None or sample.sampled_at is None:
        return False
    return sample.sampled_at < previous.sampled_at


class PodReadings:
    """Reads each pod of a runtime from a refresh's answers, holding the last good sample of each."""

    def __init__(self, signals: Sequence[SignalQuery], reader: PrometheusReader, garbage: PrometheusGarbage,
                 other_pods: OtherPods, count: Callable[[str], None]) -> None:
        """`count(reason)`: a failure counted (a garbled last-served time), as the source counts its own."""
        self._signals = signals
        self._reader = reader
        self._garbage = garbage
        self._other_pods = other_pods
        self._count = count
        self.last: dict[PodRef, PodSample] = {}
        """Each pod's last good sample."""
        self._held_for = HeldFor()  # which pod object each of `last` was read of (`prometheus_pod_objects`)

    def forget(self, known: Collection[PodRef]) -> None:
        """Drop what is held of pods not in `known` (discovery no longer lists them)."""
        for ref in [ref for ref in self.last if ref not in known]:
            del self.last[ref]
        self._held_for.forget(known)

    def snapshot(
        self,
        runtime: RuntimeInventory,
        answers: Mapping[str, Mapping[PodRef, str]],
        seen: set[PodRef],
        now: float,
        source_ok: bool,
        discovery_ok: bool,
    ) -> RuntimeSnapshot:
        """The runtime's snapshot: each pod's sample from `answers` where it was read, else its last good one."""
        pods: list[PodSample] = []
        models_garbled = False  # a pod whose model times were all garbage
        for target in runtime.pods:
            ref = (runtime.key.namespace, target.name)
            previous = self._held_for.held(ref, target, self.last)  # not an earlier pod's of the name
            # A pod read before whose load left the answer (no freshness) is read for its GPU (`_read_pod`).
            read = ref not in self._other_pods and (
                ref in seen or (previous is not None and ref in answers.get("gpu_busy", ())))
            sample, garbled = self._read_pod(ref, answers) if read else (None, False)
            sample = of_this_pod(sample, target.created_at)  # an earlier pod's series (`prometheus_pod_objects`)
            models_garbled = models_garbled or garbled
            if sample is not None and sample.sampled_at is None:  # its GPU read, its load not
                if previous is None:  # nothing to hold beside it: not read yet, as before its first load reading
                    sample = PodSample(name=target.name)
                else:  # the last good load, at its old time, beside the GPU read (as the scrape source holds it)
                    sample = with_gpu_read(previous, sample)
                    self.last[ref] = sample
            elif sample is not None and not _older(sample, previous):
                # Its GPU busy gone from the answer (the GPU collector failing, DCGM's series gone) while its load
                # is read: the last good one, at its old time (`held_gpu`), as a pod gone from the answer is held.
                sample = with_last_gpu(sample, previous)
                self.last[ref] = sample
            else:  # not seen, garbage freshness, or older than what we had: hold the last good sample
                sample = previous or PodSample(name=target.name)
            pods.append(replace(sample, ready=target.ready, created_at=target.created_at,
                                unready_since=target.unready_since))
        self._garbage.note_runtime(runtime, now)
        # No evidence that its pods stopped reporting per-model use (`RuntimeSnapshot.models_unread`): the models
        # query failed, the answers were partial (a store Thanos could not reach), or a pod's times all garbage.
        models_unread = self._reader.models_error is not None or bool(self._reader.warnings) or models_garbled
        return runtime.snapshot(tuple(pods), now, source_ok, models_unread, discovery_ok)

    def _read_pod(self, ref: PodRef, answers: Mapping[str, Mapping[PodRef, str]]) -> tuple[PodSample | None, bool]:
        """This refresh's sample of a pod, None when its freshness itself is garbage (or absent) and no GPU busy was
        read, its GPU's alone (`sampled_at` None) where one was; and whether the model times it gave were all
        garbage (`_recent_models`)."""
        fields: dict[str, float | None] = {}
        refused: list[str] = []
        garbled: list[str] = []
        for signal in self._signals:
            raw = answers[signal.field].get(ref)
            value = None if raw is None else valid_value(raw)
            series = _SERIES.get(signal.field, signal.field)
            why = None if value is None else refusal(signal.field, value, series)
            bad = (raw is not None and value is None) or why is not None
            self._garbage.note(ref, signal.field, bad=bad, raw=raw, why=why)
            if why is not None:
                refused.append(why)
            elif bad:
                garbled.append(f"{series} {raw}")
            fields[signal.field] = value
        self._garbage.note_reading(ref, garbled, fields[FRESHNESS] is None, refused)
        if refused:  # a value no real pod reaches: the whole reading is garbage; the last good sample is held
            return None, False
        sampled_at, gpu_sampled_at = fields[FRESHNESS], fields[GPU_FRESHNESS]
        offset = self._reader.clock_offset_s  # Prometheus's clock to ours
        if sampled_at is None:
            # No load reading (an exporter whose ModelMesh collector fails from its start), its GPU read or not: the
            # GPU's alone, beside which `_snapshot` holds the last good load.
            if fields["gpu_busy"] is None or gpu_sampled_at is None:
                return None, False
            return PodSample(name=ref[1], gpu_sampled_at=gpu_sampled_at - offset, gpu_busy=fields["gpu_busy"]), False
        sampled_at -= offset
        recent, models_garbled = self._recent_models(ref, offset, sampled_at)
        return PodSample(
            name=ref[1],
            sampled_at=sampled_at,
            gpu_sampled_at=None if gpu_sampled_at is None or fields["gpu_busy"] is None else gpu_sampled_at - offset,
            gpu_busy=fields["gpu_busy"],
            requests_per_second=fields["requests_per_second"],
            queue_delay_s=fields["queue_delay_s"],
            cache_misses_per_second=fields["cache_misses_per_second"],
            lru_age_s=fields["lru_age_s"],
            cache_used_ratio=fields["cache_used_ratio"],
            models_loaded=fields["models_loaded"],
            recent_models=recent,
            no_gpu_collector=ref in self._reader.no_gpu_collector,  # its GPU absent, not missing (`prometheus_no_gpu`)
        ), models_garbled

    def _recent_models(self, ref: PodRef, offset: float, sampled_at: float) -> tuple[dict[str, float] | None, bool]:
        """The pod's last-served times on our clock, never later than its `sampled_at` (as the scrape source
        reads them); {} when it publishes the series but served nothing in the window; None when it does not
        publish it, the query failed or was not asked, or every time it gave is garbage, which the second value
        says (garbage is no word that the pod stopped reporting per-model use)."""
        answer = self._reader.models
        raw = None if answer is None else answer.get(ref)
        if raw is None:
            return None, False
        models: dict[str, float] = {}
        bad: str | None = None
        for model, text in raw.items():
            at = valid_value(text)
            if at is None:
                self._count(REASON_GARBAGE)
                bad = text
            else:
                models[model] = min(at - offset, sampled_at)
        self._garbage.note(ref, RECENT_MODELS, bad=bad is not None, raw=bad, counted=True)
        if bad is not None and not models:
            return None, True
        return models, False
