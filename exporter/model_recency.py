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

At the exporter's first read a count says a model was served some time in the container's life, not when: the
read is a baseline, and such a model is stamped once its count rises (`ModelRecency.update`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from exporter.modelmesh_text import REQUESTS, Labels, ModelMeshReading
from exporter.names import MM_MODEL_ID_LABEL

log = logging.getLogger("exporter.collectors.modelmesh")


class ModelRecency:
    """Model id → Unix time of the last read that saw the model served in this pod, within a horizon."""

    def __init__(self, horizon_s: float) -> None:
        self.horizon_s = horizon_s
        self._last_served: dict[str, float] = {}
        self.reports = False
        """Whether ModelMesh has shown it counts per model (a request series labelled `modelId`): then a pod
        with no model served within the horizon says it served none, rather than nothing (docs/design.md).
        Stays True over a ModelMesh restart, whose new container has no labelled series before its first
        request: its settings are the old one's (changing MM_METRICS rolls the pod, the exporter with it)."""

    def update(self, reading: ModelMeshReading, risen: frozenset[Labels] | None, now: float) -> None:
        """Fold in one good read at Unix time `now`: `risen` are the request series `CounterWindow.add` saw rise,
        None at the exporter's first read.

        At the first read a model's count above 0 cannot say when ModelMesh served it: a minute ago, or a week.
        It is not stamped; it is once its count rises, within a read for a model in use. Stamped at the first
        read, as it was, every model the container ever served looked served just now after a sidecar restart
        (an OOM kill, a failed liveness probe): the pod's unique copies became the runtime's most by far, and as
        the adapter scales the term by the most, every other pod's real unique copies counted for next to
        nothing, for a whole horizon. Not stamping costs only a model served shortly before the restart and not
        since: its copy counts for nothing until it is served again.
        """
        counts = reading.counters.get(REQUESTS, {})
        if not self.reports:
            self.reports = any(_model_id(labels) is not None for labels in counts)
        if risen is None:
            if before := {model for labels, count in counts.items() if count > 0 and (model := _model_id(labels))}:
                log.info("%d models were served before this exporter's first read of ModelMesh, when is unknown: "
                         "each is published as served once its count rises", len(before))
            risen = frozenset()
        served: Iterable[Labels] = risen
        for labels in served:
            model = _model_id(labels)
            if model:  # ModelMesh labels a request without a model id "": no model
                self._last_served[model] = now
        oldest = now - self.horizon_s
        for model in [model for model, at in self._last_served.items() if at < oldest]:
            del self._last_served[model]

    @property
    def last_served(self) -> Mapping[str, float]:
        return self._last_served


def _model_id(labels: Labels) -> str | None:
    for name, value in labels:
        if name == MM_MODEL_ID_LABEL:
            return value
    return None
