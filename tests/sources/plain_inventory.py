"""Discovery's previous, plain inventory, kept as the oracle of the indexed one.

`autoscaler.sources.kube_objects.build_inventory` finds each runtime's pods through indexes (by Deployment, and
by the rarest label of its selector) so that a rebuild costs about as much as there are pods; this is what it
computes, written the plain way: every pod of the namespace tested against every runtime's selector and owner,
each target built through `PodTarget`'s constructor. `test_inventory_index.py` checks on random fleets that both
give the same inventory."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.kube_objects import PodRecord, RuntimeRecord, scheme_of


def plain_inventory(runtimes: Mapping[RuntimeKey, RuntimeRecord], pods: Iterable[PodRecord], exporter_port: int,
                    scheme: str = "auto") -> dict[RuntimeKey, RuntimeInventory]:
    """Every runtime with the pods it selects and runs (or may adopt), in name order, as `build_inventory`."""
    pods = list(pods)
    result: dict[RuntimeKey, RuntimeInventory] = {}
    for key in sorted(runtimes):
        runtime = runtimes[key]
        mine = [pod for pod in pods if pod.namespace == key.namespace
                and all(pod.labels.get(label) == value for label, value in runtime.selector.items())
                and (not pod.controlled or pod.deployment == key.deployment)]
        targets = sorted((plain_target(pod, exporter_port, scheme) for pod in mine), key=lambda t: t.name)
        result[key] = RuntimeInventory(key, tuple(targets), runtime.replicas, dict(runtime.annotations), runtime.uid)
    return result


def plain_target(pod: PodRecord, exporter_port: int, scheme: str) -> PodTarget:
    """The pod's target: no URL when its containers declare ports but not the exporter's, else its exporter's."""
    if pod.declared_ports is not None and exporter_port not in pod.declared_ports:
        return PodTarget(name=pod.name, ready=pod.ready, url=None, created_at=pod.created_at,
                         undeclared_exporter_port=exporter_port, uid=pod.uid, unready_since=pod.unready_since)
    host = None if pod.ip is None else f"[{pod.ip}]" if ":" in pod.ip else pod.ip
    url = None if host is None else f"{scheme_of(pod, exporter_port, scheme)}://{host}:{exporter_port}/metrics"
    return PodTarget(name=pod.name, ready=pod.ready, url=url, created_at=pod.created_at, uid=pod.uid,
                     unready_since=pod.unready_since)
