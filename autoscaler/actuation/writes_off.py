"""Whether `serve` writes to Kubernetes at all (deletion costs, the replica bridge), decided from its settings
before the writing side is imported: that side imports the Kubernetes library, a third of a second or more of
every start, which `--targets FILE` outside a cluster (the demo's adapter, and `--deletion-cost off` with the
bridge off) never uses."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from autoscaler.actuation.cluster_pods import ClusterPods
from autoscaler.kube.where import in_cluster
from autoscaler.settings import ServeSettings

if TYPE_CHECKING:
    from autoscaler.actuation.actuator import DeletionCostActuator
    from autoscaler.refresher import Refresher
    from autoscaler.selfmetrics import AdapterMetrics

log = logging.getLogger(__name__)


def bridges_replicas(settings: ServeSettings) -> bool:
    """Whether the replica bridge runs: where runtimes are discovered in a cluster, unless `--bridge off`. Never
    with a targets file, as the start-up warning says of `--bridge on` there: the file names the runtimes served,
    and a bridge without discovery (nor `--namespaces`) wrote every RuntimeScale of the cluster, runtimes the
    file does not name included."""
    return settings.targets is None and settings.bridge is not False


def written_namespaces(settings: ServeSettings) -> tuple[str, ...]:
    """The namespaces `serve` may write in (empty: every namespace): `--namespaces`, where runtimes are discovered
    in Kubernetes. That flag is where an operator says, and the namespaced RBAC overlay binds, where the adapter
    may act; a policy-file runtime outside it is still read and served (`autoscaler.runtimes_outside_namespaces`),
    but a write there lands where nobody listed it, or is refused (403) at every pass. With a targets file
    `--namespaces` does nothing (`autoscaler.preflight`), so it bounds nothing."""
    return settings.namespaces if settings.targets is None else ()


def why_nothing_is_written(settings: ServeSettings) -> str | None:
    """Why these settings write nothing to Kubernetes, or None where they write: also what the start-up warning
    about the leader-election settings, which then elect no one, says (`autoscaler.unused_settings`)."""
    if not settings.deletion_cost and not bridges_replicas(settings):
        return "--deletion-cost=off and the replica bridge off: no Kubernetes writes"
    if settings.kubeconfig is None and settings.targets is not None and not in_cluster():
        return ("pod-deletion costs cannot be written: --targets without --kubeconfig outside a cluster names no "
                "Kubernetes API")
    return None


def unwritten_costs_warning(settings: ServeSettings) -> str | None:
    """Every runtime's /debug warning where deletion costs are asked for but nothing can write them (no Kubernetes
    API named): its pods' `deletion_cost` is still shown, as the cost the adapter would write, since no ReplicaSet
    reads pods a targets file names outside a cluster, the demo plays the ReplicaSet from those costs, and a
    null would hide what a `--kubeconfig` would write. None where the costs are written or turned off."""
    reason = why_nothing_is_written(settings) if settings.deletion_cost else None
    if reason is None:
        return None
    # Said for the demo too, whose adapter runs so: it has no --kubeconfig, and needs none.
    return (f"{reason}: each pod's deletion_cost is the cost the adapter would write, on no pod (modelmesh-autoscaler "
            f"demo removes its pods by these costs itself, as a ReplicaSet would: nothing to change there); a serve "
            f"of your own writes them with --kubeconfig or in the cluster, and shows none with --deletion-cost off")


def elects_leader(settings: ServeSettings) -> bool:
    """Whether `serve` elects a leader (a Lease): only to write to Kubernetes, where `--leader-elect` is true, or
    unset in a cluster. Where it does not, the Lease's settings are used nowhere, so their rules do not apply."""
    if why_nothing_is_written(settings) is not None:
        return False
    return settings.leader_elect if settings.leader_elect is not None else in_cluster()


def writes_nothing(settings: ServeSettings) -> bool:
    """True, after saying why in the log, where these settings write nothing to Kubernetes: at INFO where the
    user turned the writes off, as a WARNING where deletion costs were asked for but cannot be written."""
    reason = why_nothing_is_written(settings)
    if reason is not None:
        log.log(logging.WARNING if settings.deletion_cost else logging.INFO, "%s; serving metrics only", reason)
    return reason is not None


async def start_writing(settings: ServeSettings, refresher: Refresher, metrics: AdapterMetrics, *,
                        cluster: ClusterPods | None = None) -> DeletionCostActuator | None:
    """`start_actuator`, imported (and the Kubernetes library with it) only where these settings write."""
    if writes_nothing(settings):
        return None
    from autoscaler.actuation.actuator import start_actuator

    return await start_actuator(settings, refresher, metrics, cluster=cluster)
