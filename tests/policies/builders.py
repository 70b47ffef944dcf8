"""Small builders for the policy tests: pods and snapshots at a fixed clock, signals by short names."""

from __future__ import annotations

from hypothesis import settings

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot

NOW = 1_700_000_000.0
KEY = RuntimeKey("ml", "modelmesh-serving-triton")

# Property tests stay fast and deterministic enough for CI on a loaded machine: no deadline (a shared
# 2-core box stalls now and then), a moderate number of examples.
PROPERTIES = settings(max_examples=100, deadline=None)


def pod(
    name: str = "pod-0",
    *,
    age: float | None = 5.0,
    ready: bool = True,
    gpu: float | None = None,
    rps: float | None = None,
    queue: float | None = None,
    lru: float | None = None,
    cache: float | None = None,
    models: float | None = None,
    now: float = NOW,
    unready_since: float | None = None,
) -> PodSample:
    """A pod sampled `age` seconds before `now` (None: never sampled); `unready_since`: a pod seen Ready before
    that stopped being Ready then (`PodSample.unready_since`)."""
    return PodSample(
        name=name,
        ready=ready,
        sampled_at=None if age is None else now - age,
        gpu_busy=gpu,
        requests_per_second=rps,
        queue_delay_s=queue,
        lru_age_s=lru,
        cache_used_ratio=cache,
        models_loaded=models,
        unready_since=unready_since,
    )


def pods_with(**columns: list[float | None]) -> tuple[PodSample, ...]:
    """Pods pod-0, pod-1, ... with one list per signal, e.g. `pods_with(gpu=[0.9, 0.1], rps=[90, 10])`."""
    count = max(len(values) for values in columns.values())
    return tuple(
        pod(f"pod-{i}", **{signal: values[i] for signal, values in columns.items()})  # type: ignore[arg-type]
        for i in range(count)
    )


def snapshot(
    pods: tuple[PodSample, ...], *, source_ok: bool = True, now: float = NOW, key: RuntimeKey = KEY,
    models_unread: bool = False,
) -> RuntimeSnapshot:
    return RuntimeSnapshot(key=key, pods=pods, taken_at=now, source_ok=source_ok, replicas=len(pods),
                           models_unread=models_unread)
