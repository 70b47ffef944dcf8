"""How many pods a `simulate` run simulates, and what sized them: a run past MAX_PODS is refused and one past
MANY_PODS warned about, each naming the flag or the part of the trace that sized it and the number it sized.

The refusal once spoke only of the trace's peak: `--min-replicas 25000` (maxReplicas is at least one more) read
"the trace's peak ... needs 2 pods, more than simulate runs (20,000)", a peak needing 10,500 pods (maxReplicas
twice that, 21,000) read "needs 10,500 pods, more than ... (20,000)", and a synthetic run sized by `--rps` was
told to check its trace's requests.

`sizing` works out a run's pods; `short_of_cache` and `short_of_requests` are the warnings for a --max-replicas
below what the trace needs, and `fixed_why` is `fixed`'s description in the report."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

MANY_PODS: Final = 2000
"""A maxReplicas past this makes a run slow enough (minutes) to look hung: `simulate` says why."""
MAX_PODS: Final = 20_000
"""More pods than a runtime runs, and a day of them takes hours a policy: a run sized past this is refused."""
BUSY: Final = 0.8
"""How busy `fixed`'s pods are at the trace's peak, and the autoscaled policies' pods at its first interval
(`sizing`): the messages that name it say what the run used."""


def peak_need(peak_rps: float, pod_rps: float) -> int:
    """The pods the peak needs at full capacity (at least one)."""
    return max(1, math.ceil(peak_rps / pod_rps - 1e-9))


def _rate(peak_rps: float) -> str:
    """A peak's requests per second as the messages write it: whole above 100 (`1,234`), else 3 figures."""
    return f"{peak_rps:,.0f}" if peak_rps >= 100 else f"{peak_rps:.3g}"


def cache_sized(peak_rps: float, pod_rps: float, peak_pods: int) -> bool:
    """Whether the models in use, not the requests, size the default maxReplicas."""
    return peak_pods > peak_need(peak_rps, pod_rps)


@dataclass(frozen=True)
class RunSize:
    """The pods a run simulates and what it was given that sized them (`sizing`)."""

    fixed: int
    """fixed's replicas: the peak's requests at BUSY, or --min-replicas where more."""
    maximum: int
    """maxReplicas: --max-replicas, or twice what the peak needs, or --min-replicas + 1 where more."""
    peak_rps: float
    pod_rps: float
    min_replicas: int
    max_given: bool
    peak_pods: int
    """The pods that hold the models in use at the busiest interval (`Oracle.peak_pods`)."""
    cache_models: int
    synthetic_rps: float | None = None
    """--rps of a synthetic trace (None for a file): the flag to name where the requests sized the run."""

    def _rate(self) -> str:
        return _rate(self.peak_rps)

    def _maximum_sized(self) -> tuple[str, str]:
        """(what sized maxReplicas, ending "maxReplicas N ...", and what to do about it)."""
        need = peak_need(self.peak_rps, self.pod_rps)
        if self.max_given:
            return f"--max-replicas {self.maximum:,}", "Give a smaller --max-replicas"
        if self.maximum == self.min_replicas + 1 and self.maximum > 2 * max(need, self.peak_pods):
            return (f"--min-replicas {self.min_replicas:,} sizes maxReplicas {self.maximum:,} (one more)",
                    "Give a smaller --min-replicas")
        twice = f"which size maxReplicas {self.maximum:,} (twice that)"
        if cache_sized(self.peak_rps, self.pod_rps, self.peak_pods):  # a request's id in the model column
            return (f"the models the trace uses at once, {self.cache_models:,} copies a pod (--cache-models), "
                    f"need {self.peak_pods:,} pods, {twice}",
                    "Check the trace's model column (a model's name, not a request's id) and --cache-models, or "
                    "give --max-replicas")
        if self.synthetic_rps is not None:
            return (f"--rps {self.synthetic_rps:g} draws a peak of {self._rate()} requests/s, which at --pod-rps "
                    f"{self.pod_rps:g} needs {need:,} pods, {twice}",
                    "Give a smaller --rps or a larger --pod-rps (what one pod serves at 100% busy), or give "
                    "--max-replicas")
        return (f"the trace's peak ({self._rate()} requests/s) at --pod-rps {self.pod_rps:g} needs {need:,} pods, "
                f"{twice}",
                "Check the trace's requests (the count in each interval: not a rate, a byte count or a counter's "
                "running total) and --pod-rps (what one pod serves at 100% busy), or give --max-replicas")

    def check(self, policies: tuple[str, ...]) -> None:
        """Refuse a run that would simulate more than MAX_PODS pods, naming what sized it: a count no cluster
        serves (a byte count, a counter's running total, a rate of a coarser unit) sized billions of pods, and
        the run, warned about, never ended."""
        if self.maximum > MAX_PODS and any(name != "fixed" for name in policies):
            sized, advice = self._maximum_sized()
            if self.max_given:
                raise ValueError(f"{sized} is more pods than simulate runs ({MAX_PODS:,}): give a smaller one")
            raise ValueError(f"{sized}: more pods than simulate runs ({MAX_PODS:,}). {advice}")
        if self.fixed > MAX_PODS and "fixed" in policies:
            if self.fixed == self.min_replicas:
                raise ValueError(f"fixed runs --min-replicas {self.fixed:,} pods, more than simulate runs "
                                 f"({MAX_PODS:,}): give a smaller --min-replicas")
            check = "--rps" if self.synthetic_rps is not None else "the trace's requests"
            raise ValueError(f"fixed (the peak's need at {BUSY:.0%} busy) runs {self.fixed:,} pods, more than simulate "
                             f"runs ({MAX_PODS:,}): check {check} and --pod-rps, or leave fixed out of --policies")

    def slow(self) -> str | None:
        """The warning for a maxReplicas past MANY_PODS, or None."""
        if self.maximum <= MANY_PODS:
            return None
        sized, advice = self._maximum_sized()
        return f"{sized}: each policy simulates that many pods, which takes long. {advice}"


def sizing(peak_rps: float, first_rps: float, pod_rps: float, min_replicas: int, max_replicas: int | None,
           busy: float = BUSY, peak_pods: int = 0) -> tuple[int, int, int]:
    """(fixed replicas: the peak at `busy`; maxReplicas: twice what the peak needs unless given; the autoscaled
    policies' starting replicas: what the first bucket needs at `busy`).

    What the peak needs is the larger of the pods its requests need at full capacity and `peak_pods`, the most
    any interval needs to hold the models used within `target_lru_age_s` as well (`Oracle.peak_pods`): sized
    from requests alone, a runtime of many quiet models got a bound below what its cache needs, and every policy
    sat at it, with ModelMesh refusing loads (a tenth of the requests failing on a day of 5,000 models)."""
    fixed = max(min_replicas, math.ceil(peak_rps / (pod_rps * busy) - 1e-9))
    maximum = max_replicas or max(min_replicas + 1, 2 * max(peak_need(peak_rps, pod_rps), peak_pods))
    if maximum < min_replicas:
        raise ValueError(f"--max-replicas ({maximum}) is below --min-replicas ({min_replicas})")
    start = min(maximum, max(min_replicas, math.ceil(first_rps / (pod_rps * busy) - 1e-9)))
    return fixed, maximum, start


def models_pods(models: int, cache_models: int) -> int:
    """The pods that hold `models` at `cache_models` copies a pod."""
    return math.ceil(models / cache_models)


def short_of_cache(maximum: int, cache_models: int, peak_models: int, lru_age_s: float) -> str | None:
    """What a given maxReplicas too few to hold the models in use does: every policy's pods are short of cache
    there, ModelMesh refuses loads and requests fail, and the table read as the policies' result with nothing
    said before the run (a day of 5,000 quiet models at --max-replicas 10: 83% of requests refused)."""
    need = models_pods(peak_models, cache_models)
    if need <= maximum:
        return None
    return (f"--max-replicas {maximum} pods hold {maximum * cache_models:,} model copies (--cache-models "
            f"{cache_models}), fewer than the {peak_models:,} models the trace uses within {lru_age_s:g} s "
            f"(target_lru_age_s) at its busiest, which need {need:,} pods: there every policy's pods are short of "
            "cache, ModelMesh evicts models still in use and refuses loads (those requests fail, counted as "
            f"delayed). Give --max-replicas {2 * need} (what it defaults to) or more, or check --cache-models")


def short_of_requests(maximum: int, fixed: int, peak_rps: float, pod_rps: float, default: int) -> str | None:
    """What a given maxReplicas below the peak's requests does: every policy is held there and queues, and the
    table reads as the policies' result; the bound's line said so only after the run."""
    if fixed <= maximum:
        return None
    return (f"--max-replicas {maximum} is below the {fixed} pods the trace's peak ({_rate(peak_rps)} requests/s) needs "
            f"at {BUSY:.0%} busy (--pod-rps {pod_rps:g}): every policy is held at {maximum} there and its requests "
            f"queue, so the table shows the cap, not the policies. Give --max-replicas {default} (what it defaults "
            "to) or more, or check --pod-rps")


def fixed_why(fixed: int, cache_models: int, peak_models: int) -> str:
    """`fixed`'s description: sized from the peak's requests, which on a trace of many quiet models is far
    below what holding them takes, and a report that called it "the peak's need" read as a fair baseline."""
    need = models_pods(peak_models, cache_models)
    if need <= fixed:
        return f"the peak's need at {BUSY:.0%} busy"
    return f"the peak's requests at {BUSY:.0%} busy, fewer than the {need:,} pods the models in use need"
