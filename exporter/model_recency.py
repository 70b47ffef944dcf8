"""When this pod last served each model, for the unique-copy term of the pod's need (docs/design.md).

With `per_model_metrics=true` in ModelMesh's MM_METRICS, its invoke histogram (requests that ran in this pod)
carries the model's id in `modelId`. A model was served between two reads when any of its request-count
series rose: per series, as `CounterWindow` follows them (a series missing from one body is not a restart and
is not served again when it comes back; at a restart every series of the new container with a count is new),
so summing over method, code and vModelId needs no sum of its own. The read's time is stamped on the model:
the time is that of the read, not of the request, so it is at most one read interval late. A restart of
ModelMesh shows only once one of the new container's counts is below the old one's (or none of the old series
is left); the new container's models are stamped at that read: late, never early.

ModelMesh keeps a model's series for the life of its container, so the models kept here are only those served
within `horizon_s`: the exporter's output does not grow with every model the pod ever served.

What ModelMesh counted before the exporter's first read was served at a time nobody knows: a minute ago or a
week. Those models are not stamped at that read (after a sidecar restart on a pod at the cap, some 80,000 models,
every one "served now" for a whole horizon where the pod served two in the last hour: the adapter's cache need
counted them all as copies in use, and the series count grew with them), nor taken as not served (the pod's only
recent copy of a model would count for nothing, and the pod could be removed on that guess). The pod says it does
not know yet: `reports` is False, so the family is absent, which the adapter reads as per-model use missing and
holds on (the cache term may rise, not fall), until each such model is served again (its time then known) or the
horizon has passed since that read (any serve before it is outside the horizon). A new pod's exporter reads
ModelMesh before its first request (ModelMesh is sent requests once Ready), so a sidecar restarted alone is what
meets it.
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.modelmesh_text import COUNTER_FIELDS, REQUESTS, Labels, ModelMeshReading
from exporter.names import MM_MODEL_ID_LABEL


class ModelRecency:
    """Model id → Unix time of the last read that saw the model served in this pod, within a horizon."""

    def __init__(self, horizon_s: float) -> None:
        self.horizon_s = horizon_s
        self._last_served: dict[str, float] = {}
        self._unknown: set[str] = set()
        """Models ModelMesh counted before the exporter's first read and not seen served since: their last serve
        is unknown, within the horizon or not."""
        self._unknown_since = 0.0
        """The first read's time: every serve of the models in `_unknown` was at or before it."""
        self._per_model: bool | None = None
        """Whether ModelMesh counts per model, from the shape of its counter series: True once one is labelled
        `modelId`; False once one is not: a request counted without it, or the unlabelled queue-delay and
        cache-miss histograms, which ModelMesh without per-model metrics serves at 0 from its start (a Prometheus
        histogram with no labels has its series from the start; a labelled one only from its first use). None
        while there is no counter series at all. Both answers stay over a ModelMesh restart: its settings are the
        old one's (changing MM_METRICS rolls the pod, the exporter with it)."""

    @property
    def reports(self) -> bool:
        """Whether the pod can say which models it served, "none" included (docs/design.md).

        With per-model metrics on, yes; off, no: a model served here is not known, so the family stays absent
        rather than saying "served none". No counter series at all is a ModelMesh with per-model metrics on (off,
        its unlabelled histograms would be there) that has run no request since its start: it served no model
        here, "none", known. An idle pod, or one a scale-up just added, must not read as a pod whose use nobody
        counted: that holds the runtime's cache term up for as long as the pod stays idle. Not while a model
        counted before the exporter's first read has an unknown time (`unknown`): not known yet."""
        return self._per_model is not False and not self._unknown

    @property
    def unknown(self) -> int:
        """How many models counted before the exporter's first read are not served since, within the horizon of
        that read: while any is, `reports` is False."""
        return len(self._unknown)

    @property
    def known_by(self) -> float:
        """When the models counted before the exporter's first read stop counting: the horizon after that read."""
        return self._unknown_since + self.horizon_s

    def update(self, reading: ModelMeshReading, risen: frozenset[Labels] | None, now: float) -> None:
        """Fold in one good read at Unix time `now`: `risen` are the request series `CounterWindow.add` saw rise,
        None at the exporter's first read, whose counted models are `unknown` (module docstring)."""
        counts = reading.counters.get(REQUESTS, {})
        if not self._per_model:  # off may still turn on: a labelled series is the stronger evidence
            self._per_model = _counts_per_model(reading, self._per_model)
        oldest = now - self.horizon_s
        if risen is None:
            self._unknown = {model for labels, count in counts.items() if count > 0 and (model := _model_id(labels))}
            self._unknown_since = now
        else:
            for labels in risen:
                model = _model_id(labels)
                if model:  # ModelMesh labels a request without a model id "": no model
                    self._last_served[model] = now
                    self._unknown.discard(model)
            if self._unknown and self._unknown_since < oldest:  # served before the horizon, if ever within it
                self._unknown = set()
        for model in [model for model, at in self._last_served.items() if at < oldest]:
            del self._last_served[model]

    @property
    def last_served(self) -> Mapping[str, float]:
        return self._last_served


def _counts_per_model(reading: ModelMeshReading, known: bool | None) -> bool | None:
    """True where a counter series of `reading` is labelled `modelId`, else False where one is not, else `known`.

    Without per-model metrics the series are few (method and code, and one each of the unlabelled histograms), so
    looking at every one at every read, as this is while the answer is not True, costs little."""
    unlabelled = False
    for field in COUNTER_FIELDS:
        for labels in reading.counters.get(field, {}):
            if _model_id(labels) is not None:
                return True
            unlabelled = True
    return False if unlabelled else known


def _model_id(labels: Labels) -> str | None:
    for name, value in labels:
        if name == MM_MODEL_ID_LABEL:
            return value
    return None
