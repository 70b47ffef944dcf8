"""A runtime none of whose pods has reported per-model use for `target_lru_age_s` forgets it: its cache term
stops holding its last proposal.

A runtime remembers that its pods reported per-model use (`SIGNAL_MODELS` in `RuntimeMemory.seen`), so that
pods that report none now hold the cache term rather than dropping its cache need: they may have served models
nobody counted (a Prometheus models query failing, an exporter restarting). But that memory never shrank: a
runtime whose ModelMesh was downgraded to one without per-model metrics, or whose exporters were rolled back,
held its last cache proposal for as long as the adapter ran (`per-model use missing on N of N ready pods`), and
`modelmesh_desired_replicas` never fell below it. Unlike the GPU (`gpu_forgetting`), no exporter says "I have no
per-model use", so time decides: the cache need counts the models served within `target_lru_age_s`, so once no
Ready pod with fresh load data has reported any for a whole `target_lru_age_s` (on the adapter's running clock),
every model the held proposal counted lies outside its window; holding it longer rests on nothing the adapter
saw. The runtime then forgets per-model use and that proposal, said once at INFO, and is what a runtime that
never reported it is: its cache term reads the cache signals alone. A pod that reports per-model use again
brings it back. One pod that still reports keeps it: the others' models would be missing from a count the
reporting pod keeps current. A refresh whose source could not read per-model use (`RuntimeSnapshot.models_unread`:
the Prometheus models query failing, an exporter whose every last-served time is garbage) is no evidence that it
stopped, so it does not age the memory (`decide` restarts the clock there): a failing query never lowers the cache
need, however long it fails.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from autoscaler.model import RuntimeKey
from autoscaler.policies.recommendation import CACHE
from autoscaler.policies.signals import SIGNAL_MODELS

log = logging.getLogger(__name__)


def forgets_models(seen: frozenset[str], reported_at: float | None, observed: bool, at: float,
                   window_s: float) -> bool:
    """Whether the runtime forgets per-model use at `at` (the running clock): it remembers it, a pod last reported
    it at `reported_at`, a whole `window_s` (`target_lru_age_s`) ago or more, and this refresh `observed` the pods
    (the source answered, enough of them fresh) without it: an outage alone forgets nothing."""
    return observed and reported_at is not None and at - reported_at >= window_s and SIGNAL_MODELS in seen


def forget_models(key: RuntimeKey, seen: frozenset[str], proposals: Mapping[str, int],
                  unreported_s: float, window_s: float) -> tuple[frozenset[str], dict[str, int]]:
    """The memory's `seen` and `proposals` without per-model use and the cache proposal that stood on it, said
    once (the runtime remembers it again only when a pod reports it)."""
    last = proposals.get(CACHE)
    held = (f"its last cache proposal ({last} pods) no longer holds the recommendation" if last is not None
            else "its cache term no longer holds for it")
    log.info("runtime %s forgets its per-model use: no ready pod has reported it for %.0f s (target_lru_age_s "
             "%g s, the cache need's window: every model the held proposal counted is outside it); %s, and the "
             "cache term reads the cache signals alone (a pod that reports per-model use again brings it back)",
             key, unreported_s, window_s, held)
    return seen - {SIGNAL_MODELS}, {term: value for term, value in proposals.items() if term != CACHE}
