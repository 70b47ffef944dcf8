"""ModelMesh's rate check: when a copy's own request rate asks for more copies of its model, and how many.

Every pod of a ModelMesh runtime runs `rateTrackingTask` (kserve/modelmesh src/main/java/com/ibm/watson/
modelmesh/ModelMesh.java l.5619-5857) every `RATE_CHECK_INTERVAL_MS`, 10 s (l.238). For each model it holds
that took requests since the last run, it turns the requests counted on that copy (`recordInvocation`, at
arrival, before any queueing: l.2691) into a rate and:

- skips unless the rate reaches the scale-up threshold (`if (rpm < scaleUpRpms) continue`, l.5762). In latency-based
  mode, the mode of a runtime that limits model concurrency, the threshold is 90% of the copy's measured bandwidth, max
  concurrency over the mean time a request takes (`getRpmScaleThreshold`, l.2766-2796); without it,
  `scaleUpRpmThreshold`, 2000 rpm (l.240, l.5677-5681): `--queue-untimed`, a runtime not annotated
  `perModelConcurrencyLimit` (`flat_quiet_count`; the whole of it below). A simulated pod serves `pod_rps` at full busy,
  shared between its copies as a GPU is: a request takes longer while other models' requests run, so a copy's measured
  bandwidth is what the pod has left for it, `pod_rps` less what the pod serves of the other models (`copy_threshold`),
  and never less than what the pod serves over its copies in use, each of which lets at most its max concurrency into
  the model server. A copy alone on its pod asks for more at 90% of `pod_rps`; on a saturated pod every copy with work
  queued is at its bandwidth and asks for one. A copy that has completed fewer than 8 requests since it loaded has no
  measure yet and ModelMesh falls back to 2000 rpm (l.2779-2781): the completions add up across checks until there are
  64 (`young_copies`), so a model at 2 or 3 requests a check is measured after four, and its copies on a saturated pod
  ask for more as a busy model's do (a simulator that took each check's own count kept 500 such models on the pods that
  held them at the start, the pods added beside them idle for 12 h);
- skips when a copy of the model on another pod started loading within the last check interval, the one
  before, and twice the time a load is assumed to take (l.5764-5769, `loadedSince` l.5860): the rate measured
  does not yet show what that copy will take. `assumeCompletedAfterMillis` settles on the mean load time when
  loads all take the same time (TimeStats.java), so here it is the load time;
- leaves out pods already taking more than four times the threshold (`getExcludeSet`, l.5835-5856; in
  latency-based mode ModelMesh's threshold there is 900 rpm per unit of model concurrency, here the copy's),
  and counts each of them twice off the candidates, as l.5775-5783 do;
- loads min(rate / threshold, pods that hold no copy) copies, capped at max(2, a third of the pods) (l.5791-
  5795), each placed as any load is (placement.py) with its last use set 20 s ahead (l.5675).

Before any of that it stamps the copy "heavy" when its rate is over three quarters of the threshold
(`heavyRpms = (scaleUpRpms * 3) / 4`, l.5706; `if (rpm > heavyRpms) ce.setLastHeavyTime(now)`, l.5710): the
janitor keeps a third copy of a model heavy within the last 5 hours (janitor.py). A copy can be that busy only
on a pod taking over `HEAVY_SHARE` of the busy mark (`heavy_mark`), so only those pods' requests are counted.

A copy still loading takes no requests while a loaded one exists (`ForwardingLB`, l.4309-4390).

Untimed (`--queue-untimed`, `limitModelConcurrency` false) every threshold is the flat `scaleUpRpmThreshold`, 2000 rpm
unless MM_SCALEUP_RPM_THRESHOLD or the kv-store's scaleup_rpm_threshold sets another (`--scaleup-rpm`,
`flat_threshold`), whatever the pod serves; with 2000: a copy asks for more at 2000 rpm (l.5677-5681, l.5762), is
heavy over 1500 (l.5706-5710), the janitor keeps a third copy over 2/3 of 2000 (l.6294-6298: `mcce == null`) and
`getExcludeSet` leaves out pods over 8000 (l.5836). Nothing else moves a hot model's requests off its copies there:
the copy's wait limit ("Model queue overload", `allWaiting`, l.2681-2699) and its queue (`limiter`) belong to
`MaxConcCacheEntry`, which ModelMesh makes only in latency-based mode (l.2636-2641, l.5053-5055;
`maxInflightPerModelCopy` is read only then, l.709-716); an untimed copy is a plain `CacheEntry`, whose `beforeInvoke`
only counts the request (l.2579-2583), which then waits in the model server's own queue. So a model whose copies each
take more than their pod serves but under 2000 rpm stays on the pods that hold it, however long their queues: a copy
at r asks for floor(r / 33.3) more, the copies end at r / (k + 1) each, and on 20 req/s pods one at 30 req/s keeps its
one copy, one at 55 its two of 27.5.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

RATE_CHECK_S = 10.0
"""`RATE_CHECK_INTERVAL_MS` (ModelMesh.java l.238)."""
BANDWIDTH_SHARE = 0.9
"""The share of a copy's bandwidth its rate must reach (`getRpmScaleThreshold`, l.2792-2795)."""
FEW_REQUESTS = 8
"""Under this many requests completed since the copy loaded the threshold is the 2000 rpm default (l.2779-2781)."""
DEFAULT_RPS = 2000.0 / 60.0
"""`DEFAULT_SCALEUP_RPM` (l.240), per second: a young copy's threshold timed (untimed every copy's is
`ClusterShape.scaleup_rpm`, `flat_threshold`)."""
DEFAULT_SCALEUP_RPM = 2000
"""`scaleUpRpmThreshold` unset (l.240): --scaleup-rpm's default, which report.md and a timed run's warning name only
where it differs."""
SCALEUP_RPM_RANGE = (10, 2**31 - 1)
"""The `scaleUpRpmThreshold` ModelMesh takes: at least 10 (under it the kv-store's value is refused, l.1048-1058),
at most a Java int."""
EXCLUDE_FACTOR = 4.0
"""Pods over this many times the threshold take no new copy (`getExcludeSet`, l.5841)."""
NEW_COPY_AHEAD_S = 20.0
"""A copy the rate check asks for counts as used this far in the future when placed (l.5675)."""
HEAVY_SHARE = 0.75
"""A copy over this share of its threshold is "heavy" (`heavyRpms = (scaleUpRpms * 3) / 4`, l.5706)."""


def threshold(pod_rps: float) -> float:
    """Requests per second a copy alone on its pod must take before it asks for more: 90% of what one pod
    serves. Pods below it are not counted: no copy on them can reach its own threshold."""
    return BANDWIDTH_SHARE * pod_rps


def heavy_mark(pod_rps: float) -> float:
    """Requests per second under which no copy on a pod is heavy: a copy at r on a pod at R <= `pod_rps` is
    heavy when r > 0.75 x 0.9 x (pod_rps - R + r), which with r <= R needs R > 0.675 x `pod_rps`."""
    return HEAVY_SHARE * threshold(pod_rps)


def copy_threshold(pod_rps: float, rate: float, pod_rate: float, completed: float, level: float,
                   active: int) -> float:
    """The rate one copy must reach to ask for more: 90% of its bandwidth (`rate`: this copy's requests per
    second, `pod_rate`: all the pod's, `completed`: the requests this copy has completed since it loaded, inf
    where that is `FEW_REQUESTS` or more: `young_copies`; `level`: the pod's `fair_level`; `active`: the pod's
    copies that took requests in the interval).

    On a pod with time to spare, what it has left for the copy: `pod_rps` less what the other models take. On a
    saturated pod, the fair level: ModelMesh lets each copy `maxConc` requests into the model server at a time,
    the others wait in the copy's own queue (`limiter` in `beforeInvoke`, l.2689-2712), and only the model
    server's call is timed (l.4494-4531); so the pod's time goes round the copies with a request in flight and a
    request takes as long as the busy copies make it, whatever its own model's rate. A copy's measured
    bandwidth, max concurrency over that time (l.2738, l.2796), is then the level, and a copy under it asks for no
    copy however saturated its pod: a model at 0.01 req/s does not measure a hundredth of a pod. (The simulated
    pod still serves every copy's arrivals in the same proportion: `pods.serve`.)

    Whatever the pod's load, no copy's bandwidth is under what the pod serves over its `active` copies: with each
    copy letting at most `maxConc` requests into the model server, no more than `active` x `maxConc` are in it, so
    by Little's law a request there takes at most that over what the pod serves, and the threshold
    (`maxConc * count * 0.9 * 600000 / timeSum`, l.2795) is at least 0.9 x what it serves / `active`. On a pod
    routed just under capacity (19.99 of 20 req/s, as pods draining a queue are while the HPA lags: routing.py
    takes the queue out of their rates), what the pod has left for a quiet copy is about its own rate, and every
    copy asked for another, models called once a minute among them (a reviewer's dense trace: one check made
    102 copies, 100 onto one new pod); ModelMesh's copies there measure the floor and ask for none. (The fair
    level of a saturated pod is never under it: max-min shares of `pod_rps` over `active` copies.)"""
    if completed < FEW_REQUESTS:
        return DEFAULT_RPS
    floor = min(pod_rate, pod_rps) / max(1, active)
    if level < math.inf:
        return BANDWIDTH_SHARE * max(level, floor)
    return BANDWIDTH_SHARE * max(pod_rps - (pod_rate - rate), floor)


def fair_level(rates: Iterable[float], pod_rps: float) -> float:
    """The rate each copy with more work than that gets when a pod's `pod_rps` go round its copies' `rates`
    (max-min fair: a copy under the level is served whole, the others each get the level); inf where the pod
    serves every request."""
    ordered = sorted(rates)
    left, count = pod_rps, len(ordered)
    for index, rate in enumerate(ordered):
        share = left / (count - index)
        if rate >= share:
            return share
        left -= rate
    return math.inf


def young_copies(young: dict[int, float], shares: Mapping[int, float], seconds: float, served: float) -> None:
    """Add to each young copy (`young`: model -> requests completed since it loaded, under `FEW_REQUESTS`) what
    it completed in `seconds` at its share of its pod's arrivals (`shares`, req/s; `served`: the share of its
    arrivals the pod serves), and drop those that reached `FEW_REQUESTS`: ModelMesh measures them from then on.

    ModelMesh adds each completion to the copy's `countAndTimeSum` (`afterInvoke`, l.2738) and resets it only once
    it holds 64, kept as `priorCount` (l.2769-2773); below 64 the check adds `priorCount` to what it holds
    (l.2777-2784). The 2000 rpm fallback (l.2780-2781) so applies only to a copy with fewer than 8 completions
    since it loaded, not to each check's own count: a model at 2 or 3 requests per check is measured after four.

    Walks the smaller of the two (`young` can hold thousands of rarely used models, `shares` the pod's models in
    use): this runs at every check on every pod."""
    if len(shares) < len(young):
        pairs = [(model, rate) for model, rate in shares.items() if model in young]
    else:
        pairs = [(model, shares[model]) for model in young if model in shares]
    done = seconds * served
    for model, rate in pairs:
        completed = young[model] + rate * done
        if completed >= FEW_REQUESTS:
            del young[model]
        else:
            young[model] = completed


def quiet_count(pod_rps: float, pod_rate: float, interval_s: float) -> float:
    """Requests in the interval at or under which a copy on a pod at `pod_rate` is neither heavy nor asks for
    more: on a pod with time to spare its rate r is heavy when r > 0.675 x (`pod_rps` - (`pod_rate` - r))
    (`copy_threshold`), i.e. r > 0.675 a / (1 - 0.675), a = `pod_rps` - `pod_rate`; a hair under that, so that a
    copy the rate check skips for it is one `copy_threshold` also finds quiet. (A young copy has the 2000 rpm
    threshold, higher: quieter still.) None on a saturated pod, whose copies are judged against its fair level.
    Without it every copy of a busy pod went through `copy_threshold` at every check."""
    served = min(1.0, pod_rps / pod_rate) if pod_rate > 0.0 else 1.0
    spare = pod_rps - pod_rate * served
    if spare <= 0.0 or interval_s < 1.0:
        return 0.0
    share = HEAVY_SHARE * BANDWIDTH_SHARE
    return share * spare / (1.0 - share * served) * interval_s * (1.0 - 1e-9)


def flat_threshold(scaleup_rpm: float) -> float:
    """Untimed, the requests per second every copy must reach to ask for more: `scaleUpRpmThreshold` (2000 rpm
    unless set) per second."""
    return scaleup_rpm / 60.0


def flat_quiet_count(interval_s: float, limit: float) -> float:
    """Untimed, requests in the interval at or under which a copy is neither heavy nor asks for more, whatever its
    pod's load: three quarters of the flat threshold `limit` (req/s: `flat_threshold`; `heavyRpms = (scaleUpRpms *
    3) / 4`, l.5680), a hair under it as `quiet_count`'s."""
    return HEAVY_SHARE * limit * interval_s * (1.0 - 1e-9)


def recent_load_cutoff(now: float, interval_s: float, load_time_s: float) -> float:
    """Loads that started after this time are too recent to judge the rate by (l.5767-5768)."""
    return now - (interval_s + RATE_CHECK_S + 2.0 * load_time_s)


def loaded_since(load_starts: Mapping[str, float], cutoff: float, own_pod: str) -> bool:
    """Whether a copy on another pod than `own_pod` started loading after `cutoff` (`loadedSince`, l.5860)."""
    return any(start > cutoff for pod, start in load_starts.items() if pod != own_pod)


def excluded(pod_rates: Iterable[tuple[str, float]], own_pod: str, own_rate: float, limit: float) -> set[str]:
    """Other pods too busy to take a copy: over max(4 x threshold, own rate - 2 x threshold) (l.5835-5856)."""
    busiest = max(EXCLUDE_FACTOR * limit, own_rate - 2.0 * limit)
    return {pod for pod, rate in pod_rates if pod != own_pod and rate > busiest}


def copies_to_load(rate: float, limit: float, candidates: int, pods: int) -> int:
    """How many copies one copy at `rate` asks for (0: none), given the pods that could take one and all the
    pods: min(rate / threshold, candidates), at most max(2, a third of the pods) (l.5762, l.5791-5795). A threshold
    of 0 (a copy whose pod has no time left for it: ModelMesh's `rpm / scaleUpRpms` then throws, and the check
    goes on to the next model) asks for none."""
    if rate < limit or limit <= 0.0 or candidates <= 0:
        return 0
    copies = min(int(rate // limit), candidates)
    if copies > 2:
        copies = min(copies, pods // 3)
    return copies
