"""One simulated runtime pod: its shape, its state, how it serves a tick and what its exporter reports.

Load is a fluid: every tick a Ready pod serves up to `pod_rps * tick` requests and the rest queues. A request
is *delayed* when it waits in the queue longer than the SLO (counted exactly for a linearly growing or
draining queue). Each pod keeps the windows its exporter averages over (GPU busy over 10 s, request rate
and queue delay over 30 s) and reports them as the `PodSample` the adapter's decision code reads, with its
copies' last use per model (`recent_models`, for the unique-copy need term).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from autoscaler.model import PodSample
from autoscaler.policies.samples import clean_sample
from autoscaler.simulation.fluid import share_over_threshold
from autoscaler.simulation.loading import LoadingQueue, LoadWaits

JANITOR_FIRST_S = 1.0
"""ModelMesh runs a pod's janitor first this long after it starts (`scheduleAtFixedRate(janitorTask(), 1L, ...)`,
ModelMesh.java); here after its start-up delay, when the simulated pod starts serving."""


@dataclass(frozen=True, slots=True)
class ClusterShape:
    pod_rps: float = 20.0  # requests per second one pod serves at 100% busy
    cache_models: int = 100  # model copies one pod holds
    load_time_s: float = 10.0
    # Loads one pod runs at once (the runtime's maxLoadingConcurrency: 1 in ModelMesh Serving's built-in
    # adapters); the rest wait in its loading queue (loading.py)
    load_concurrency: int = 1
    startup_delay_s: float = 30.0
    # A full pod whose least recently used copy is younger than this refuses a load (ModelMesh's
    # `tas.min_churn_age_ms`, 10x max(3 s, load timeout / 3): 300 s with modelmesh-serving's 90 s runtimes; 0: never)
    min_churn_age_s: float = 300.0
    slo_queue_s: float = 0.1
    # Whether ModelMesh times its request queue: only where the model server limits each model's concurrency
    # (modelmesh-serving's built-in runtimes do not, unless annotated perModelConcurrencyLimit); untimed, the
    # exporter reports a queue delay of 0 and the queue term never decides. Requests still queue and are delayed.
    queue_timed: bool = True
    # Untimed, ModelMesh's flat scale-up threshold in requests per minute a copy (`scaleUpRpmThreshold`: the runtime's
    # MM_SCALEUP_RPM_THRESHOLD, or the kv-store's scaleup_rpm_threshold; 2000 unset, ModelMesh.java l.240); timed,
    # ModelMesh measures each copy's bandwidth instead and this is not read (rate_check.py)
    scaleup_rpm: int = 2000
    gpu_window_s: float = 10.0
    load_window_s: float = 30.0


@dataclass(slots=True, eq=False)
class SimPod:
    """One runtime pod; compared and hashed by identity."""

    name: str
    created_at: float
    ready_at: float
    ready: bool = False
    cache: OrderedDict[int, float] = field(default_factory=OrderedDict)  # model -> last used, LRU first
    rate: float = 0.0  # requests per second routed here in the current bucket
    backlog: float = 0.0  # requests queued
    deletion_cost: int = 0
    busy: deque[float] = field(default_factory=deque)
    served: deque[float] = field(default_factory=deque)
    queue: deque[float] = field(default_factory=deque)
    shares: dict[int, float] = field(default_factory=dict)  # model -> the rate its copy here takes
    counted: dict[int, float] = field(default_factory=dict)  # model -> requests since the last rate check
    counted_all: float = 0.0  # all requests counted since the last rate check
    # Seconds since the last routing (or `flush_counts`) the pod was busy enough to count: its copies' requests
    # at their current shares, not yet in `counted`
    counting_s: float = 0.0
    waiting_for_load: float = 0.0  # requests still to arrive here already counted delayed (a cold load's)
    # Its loads under way and waiting for a loading thread (loading.py)
    loading: LoadingQueue = field(default_factory=lambda: loading_queue(ClusterShape()))
    heavy: dict[int, float] = field(default_factory=dict)  # model -> when the rate check last found its copy heavy
    # Copies loaded here that have completed fewer than `rate_check.FEW_REQUESTS` requests since they loaded: model ->
    # those requests. ModelMesh measures a copy's bandwidth only from its 8th (rate_check.py)
    young: dict[int, float] = field(default_factory=dict)
    janitor_at: float = 0.0  # when the pod's janitor runs next (janitor.py)


def new_pod(name: str, now: float, ready_at: float, shape: ClusterShape, tick_s: float,
            waits: LoadWaits | None = None) -> SimPod:
    """A pod created at `now`, Ready at `ready_at`, with exporter windows sized for ticks of `tick_s`; its loads'
    waits go to `waits` (its runtime's)."""
    pod = SimPod(name, created_at=now, ready_at=ready_at, janitor_at=now + shape.startup_delay_s + JANITOR_FIRST_S,
                 loading=loading_queue(shape, waits))
    gpu_ticks = max(1, round(shape.gpu_window_s / tick_s))
    load_ticks = max(1, round(shape.load_window_s / tick_s))
    pod.busy, pod.served, pod.queue = deque(maxlen=gpu_ticks), deque(maxlen=load_ticks), deque(maxlen=load_ticks)
    return pod


def loading_queue(shape: ClusterShape, waits: LoadWaits | None = None) -> LoadingQueue:
    """An idle loading queue for a pod of `shape`, counting its loads' waits in `waits` (None: its own)."""
    return LoadingQueue(shape.load_concurrency, shape.load_time_s, LoadWaits() if waits is None else waits)


@dataclass(slots=True)
class TickStats:
    delayed: float = 0.0
    delayed_loading: float = 0.0  # of `delayed`: requests that waited for a load (cold, or a scale-down's copy)
    cold_loads: int = 0
    overloaded: bool = False


Served = tuple[float, float, float, bool]
"""What one Ready pod did in one tick: requests arrived, served, delayed, and whether its queue ended the tick
beyond the SLO. A plain tuple: `serve` runs for every pod every tick (a day of 200 models: 732,000 calls), and
building a frozen dataclass took a third of its time."""


def serve(pod: SimPod, mu: float, threshold: float, capacity: float, tick_s: float) -> Served:
    """Serve one tick on a Ready pod: arrivals at `pod.rate` join its queue, `mu` (the shape's `pod_rps`) drain
    it; `threshold` (`pod_rps * slo_queue_s`: the queue beyond the SLO) and `capacity` (`pod_rps * tick_s`)
    are the caller's, worked out once a tick for all the pods rather than once a pod."""
    a = pod.rate
    b0 = pod.backlog
    arrivals = a * tick_s
    b1 = b0 + arrivals - capacity
    if b1 < 0.0:
        b1 = 0.0
    served = b0 + arrivals - b1
    delayed = arrivals * share_over_threshold(b0, a - mu, tick_s, threshold) if arrivals else 0.0
    if pod.waiting_for_load and arrivals:
        # Requests that wait for a cold load were counted delayed when it started; of the tick's queued ones
        # count only the share that was not: a request is delayed once (delayed_ratio stays <= 1).
        counted = min(pod.waiting_for_load, arrivals)
        pod.waiting_for_load -= counted
        delayed *= 1.0 - counted / arrivals
    pod.backlog = b1
    pod.busy.append(served / capacity)
    pod.served.append(served / tick_s)
    pod.queue.append((b0 + b1) / 2.0 / mu)
    return arrivals, served, delayed, b1 > threshold


def flush_counts(pod: SimPod) -> None:
    """Add the requests the pod's copies took at their current shares, over the seconds counted, to `counted`:
    before a routing changes the shares."""
    seconds = pod.counting_s
    if seconds:
        counts = pod.counted
        for model, rate in pod.shares.items():
            counts[model] = counts.get(model, 0.0) + rate * seconds
        pod.counted_all += pod.rate * seconds
        pod.counting_s = 0.0


def sample(pod: SimPod, now: float, cache_models: int, recent_models: Mapping[str, float] | None, *,
           queue_timed: bool = True) -> PodSample:
    """The pod as its exporter reports it now (not Ready, or Ready but not yet scraped: no data), with its
    copies' last uses `recent_models` (`last_uses(pod.cache)`, or None: not reported); `queue_timed` False: a
    queue delay of 0, as the exporter reports it where ModelMesh does not time its queue (`ClusterShape`)."""
    if not pod.ready or not pod.served:
        return PodSample(pod.name, ready=pod.ready, created_at=pod.created_at)
    lru = now - next(iter(pod.cache.values())) if pod.cache else None
    # The windows' means written out, not a helper's three calls: every pod is sampled at every refresh
    busy, served, queue = pod.busy, pod.served, pod.queue
    return clean_sample(PodSample(  # as a source would hand it over: garbled values absent (`PodSample`)
        pod.name, ready=True, sampled_at=now,
        gpu_busy=sum(busy) / len(busy) if busy else 0.0, requests_per_second=sum(served) / len(served),
        queue_delay_s=(sum(queue) / len(queue) if queue else 0.0) if queue_timed else 0.0,
        lru_age_s=lru, cache_used_ratio=len(pod.cache) / cache_models, models_loaded=float(len(pod.cache)),
        recent_models=recent_models, created_at=pod.created_at,
    ))


def last_uses(cache: dict[int, float]) -> dict[str, float]:
    """The pod's copies and when each last took requests (or was loaded: ModelMesh stamps a copy's last use
    when it loads), by model id, as the exporter's per-model recency series reports them; a copy, as the
    cache changes after the sample is taken. The ids' strings are made once (`_MODEL_IDS`): `str` of every
    copy of every pod at every refresh was most of this."""
    ids = _MODEL_IDS
    try:
        return dict(zip(map(ids.__getitem__, cache), cache.values(), strict=True))
    except IndexError:  # a model index not named yet (indexes count up from 0: `trace.Trace.models`)
        ids.extend(str(model) for model in range(len(ids), max(cache) + 1))
        return dict(zip(map(ids.__getitem__, cache), cache.values(), strict=True))


_MODEL_IDS: list[str] = []
"""`str(i)` at index i, for the model indexes seen so far."""
