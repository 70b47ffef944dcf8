"""Answers that say they are partial (Thanos Query's `warnings` about stores it could not reach,
VictoriaMetrics' `isPartial`), as `PrometheusSource` says them: logged once per set of warnings and when the
answers are complete again, counted once per refresh (`answers`), and a `partial` problem in /debug for the
runtimes with a Ready pod missing from them.

Not an error: the pods the answers leave out hold their last good samples, as any pod missing from an answer
does (and turn stale). Apart from the source, whose job is joining answers to the inventory, so that what is
kept of partial answers is read in one place (as `prometheus_unseen` keeps the runtimes with no series).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Final

from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey
from autoscaler.source_problems import for_every_runtime
from autoscaler.sources.base import RuntimeInventory, SourceProblem
from autoscaler.sources.prometheus_promql import PodRef

log = logging.getLogger("autoscaler.sources.prometheus")  # the source's logger: operators filter on one name

WARNINGS_SAID: Final = 3
"""The most of an answer's warnings the log and /debug repeat, and how many more: Thanos lists one a store it could
not reach, and a gateway may list thousands."""


def _warnings_said(warnings: Sequence[str]) -> str:
    return few(warnings, WARNINGS_SAID, sep="; ", more="; and {} more warnings")


REASON_PARTIAL: Final = "partial"
"""A `SourceProblem`'s reason while the answers are partial and leave out Ready pods of the runtime (not an error)."""


class PartialAnswers:
    """The warnings of the last partial answers from Prometheus at `url`, since when they are partial, which
    runtimes they leave a Ready pod out of, and how many refreshes were answered partial."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._said: frozenset[str] = frozenset()  # the partial-answer warnings last logged
        self._since: float | None = None  # when the answers turned partial; None while complete
        self._left_out: frozenset[RuntimeKey] = frozenset()  # runtimes with Ready pods the answers lack
        self.answers = 0
        """Refreshes answered partial so far (`modelmesh_autoscaler_source_partial_answers_total`)."""

    def note(self, warnings: Sequence[str]) -> None:
        """Warn when the answers say they are partial (Thanos: stores it could not reach), once per set of
        warnings; their pods then hold their last good samples, as for any pod missing from an answer."""
        said = frozenset(warnings)
        if said and not said <= self._said:
            log.warning("Prometheus at %s answered partial data (pods it left out hold their last good samples): %s",
                        self._url, _warnings_said(warnings))
        elif not said and self._said:
            log.info("Prometheus at %s answers complete data again", self._url)
        self._said = said

    def note_runtimes(self, inventory: Mapping[RuntimeKey, RuntimeInventory], seen: set[PodRef],
                      now: float) -> None:
        """Count a partial refresh (after `note`), and keep which runtimes it left a Ready pod out of, for
        `problem`."""
        if not self._said:
            self._since, self._left_out = None, frozenset()
            return
        self.answers += 1
        if self._since is None:
            self._since = now
        self._left_out = frozenset(
            key for key, runtime in inventory.items()
            if any(pod.ready and (key.namespace, pod.name) not in seen for pod in runtime.pods))

    def problem(self, key: RuntimeKey) -> SourceProblem | None:
        """The runtime's `partial` problem for /debug while the answers leave out some of its Ready pods; None
        otherwise."""
        if key not in self._left_out or self._since is None:
            return None
        return SourceProblem(
            REASON_PARTIAL, f"Prometheus at {self._url} answered partial data without some of this runtime's "
            f"Ready pods (they hold their last good samples and turn stale): "
            f"{for_every_runtime(_warnings_said(sorted(self._said)))}",
            self._since)
