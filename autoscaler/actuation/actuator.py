"""Wires the acting side of `serve` from its settings: whether pod-deletion costs are written and whether the
replica bridge runs (docs/design.md), the Kubernetes connection, leader election, the writer and the
bridge, started and stopped with the app. Both act only under the same Lease.

The rules, so that an adapter never writes where nobody asked it to:
- `--deletion-cost=off` and the bridge off: nothing here runs and the adapter makes no Kubernetes writes at all.
- Where `--namespaces` is given, nothing is written outside it: no deletion cost on the pods of a policy-file
  runtime in another namespace (`autoscaler.actuation.writes_off.written_namespaces`).
- `--bridge` defaults to on when runtimes are discovered in Kubernetes (no `--targets`), off otherwise.
- Where to write: the `--kubeconfig` when one is given; else, in a cluster, the pod's service account; else,
  when pods are discovered in Kubernetes (no `--targets`), the default kubeconfig. With `--targets`, no
  `--kubeconfig` and no cluster there is nowhere to write: one log line at start, then metrics only. (A
  developer's `~/.kube/config` is never used behind their back for a targets file.)
- A `--kubeconfig` that cannot be loaded stops start-up; a missing default one only disables writing.
- `--leader-elect` defaults to on in a cluster (replicas behind one Service) and off outside one. Without it
  this replica writes alone. The Lease lives in `--leader-elect-namespace`, else the pod's namespace (or the
  kubeconfig context's).
- Stopping (SIGTERM) starts no more writes and renews the Lease no more, waits for the writes in flight (at most
  one client timeout: `autoscaler.actuation.write_fence`), and only then releases the Lease, so that no write of
  the old leader can land after the next leader's.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.actuation.bridge_runtime_watch import serving_runtime_watches
from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.actuation.cluster_pods import ClusterPods
from autoscaler.actuation.deletion_cost import DeletionCostWriter
from autoscaler.actuation.leader import LeaseElector
from autoscaler.actuation.lease_timing import DEFAULT_CLIENT_TIMEOUT_S, LeaseConfig, client_timeout_s
from autoscaler.actuation.scale_asks import RuntimeScaleAsks
from autoscaler.actuation.write_fence import FencedClient, WriteFence
from autoscaler.actuation.writes_off import bridges_replicas, elects_leader, writes_nothing, written_namespaces
from autoscaler.kube.client import KubeClient, KubeConfigError
from autoscaler.kube.user_agent import user_agent
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from exporter.stopping import stop_tasks

log = logging.getLogger(__name__)

DRAIN_SLACK_S = 0.5
"""Waited for the writes in flight beyond the client timeout (which ends each of them): the event loop's own
delay in noticing, so that a write answered at the timeout's edge still counts as answered."""


def leader_identity() -> str:
    """Unique per process, readable per pod: the host name (the pod name in a cluster) and a random suffix,
    as client-go's controllers do, so a restarted pod never mistakes its predecessor's Lease for its own."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass
class DeletionCostActuator:
    """The running writer, bridge and elector: started by `start_actuator`, stopped by `stop()`."""

    kube: KubeClient
    writer: DeletionCostWriter | None
    elector: LeaseElector | None
    refresher: Refresher
    metrics: AdapterMetrics
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    bridge: ReplicaBridge | None = None
    fence: WriteFence = field(default_factory=WriteFence)
    _stopped: bool = field(default=False, init=False)

    def start(self) -> None:
        if self.writer is not None:
            self.refresher.cost_writes = self.writer  # views as decided; a scale-down waits for its costs
            self.tasks.append(asyncio.create_task(self.writer.run(), name="deletion-cost-writer"))
        if self.bridge is not None:
            self.tasks.append(asyncio.create_task(self.bridge.run(), name="replica-bridge"))
            watches = [RuntimeScaleWatch(self.kube, scope, self.bridge.wake, health=self.metrics,
                                         statuses=self.metrics) for scope in self.bridge.scopes]
            for watch in watches:
                self.tasks.append(asyncio.create_task(watch.run(), name=f"runtimescale-watch-{watch.scope or 'all'}"))
            self.refresher.scale_asks = RuntimeScaleAsks(watches)
            # ServingRuntimes set behind the bridge's back are set back at once, not at the next full pass.
            for runtimes in serving_runtime_watches(self.kube, self.bridge.scopes,
                                                    self.bridge.handovers.runtime_changed):
                self.tasks.append(asyncio.create_task(
                    runtimes.run(), name=f"servingruntime-watch-{runtimes.scope or 'all'}"))
        if self.elector is not None:
            self.metrics.set_leader(False)  # a replica waiting for the Lease says so: the series of no replica
            self.tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))  # is 1 => NoLeader
        else:
            self.metrics.set_leader(True)

    async def stop(self) -> None:
        """Stop writing first and wait for the writes in flight, then give the Lease up (the elector releases it
        when cancelled), then close. Only the first call does anything."""
        if self._stopped:
            return
        self._stopped = True
        if self.elector is not None:
            # No renewal while the writes in flight are waited for: they were sent within the term, which the
            # margin covers renewed or not, and where the Lease is left to expire it expires that much sooner.
            self.elector.stop_trying()
        self.refresher.scale_asks = None
        if self.refresher.cost_writes is self.writer:
            self.refresher.cost_writes = None
        in_flight = self.fence.in_flight
        answered = await self.fence.drain(self.kube.request_timeout_s + DRAIN_SLACK_S)
        if in_flight:
            log.info("stopping: %d write%s in flight %s", in_flight, "" if in_flight == 1 else "s",
                     "answered" if answered else "not all answered")
        if not answered and self.elector is not None:
            self.elector.release_on_stop = False  # one may land later: the next leader waits for the expiry
        for task in self.tasks:  # one after the other, the elector (which gives the Lease up) last
            await stop_tasks([task])
        self.metrics.set_leader(False)
        await self.kube.close()


async def start_actuator(
    settings: ServeSettings, refresher: Refresher, metrics: AdapterMetrics, *, identity: str | None = None,
    cluster: ClusterPods | None = None,
) -> DeletionCostActuator | None:
    """Start writing deletion costs and bridging replicas as the settings say, or return None (after saying why
    in the log)."""
    if writes_nothing(settings):
        return None
    if not settings.deletion_cost:
        log.info("--deletion-cost=off: pod-deletion costs are not written")
    identity = identity or leader_identity()
    electing = elects_leader(settings)
    timeout_s = DEFAULT_CLIENT_TIMEOUT_S
    if electing:  # no call may outlive the leader's term by more than the safety margin allows
        timeout_s = client_timeout_s(settings.leader_elect_lease_duration_s, settings.leader_elect_renew_deadline_s)
    try:
        kube = await KubeClient.connect(
            settings.kubeconfig, user_agent=user_agent(identity), timeout_s=timeout_s
        )
    except KubeConfigError as error:
        if settings.kubeconfig is not None:
            raise
        log.warning("pod-deletion costs are not written (serving metrics only): %s", error)
        return None
    elector: LeaseElector | None = None
    if electing:
        try:
            lease = LeaseConfig(
                namespace=settings.leader_elect_namespace or kube.default_namespace,
                name=settings.leader_elect_lease_name,
                identity=identity,
                lease_duration_s=settings.leader_elect_lease_duration_s,
                renew_deadline_s=settings.leader_elect_renew_deadline_s,
                retry_period_s=settings.leader_elect_retry_period_s,
            )
        except ValueError:
            await kube.close()
            raise
        elector = LeaseElector(kube, lease)
    fence = WriteFence()
    may_write: Callable[[], bool] = (lambda: fence.open and elector.is_leader) if elector is not None \
        else (lambda: fence.open)
    fenced = FencedClient(kube, fence)
    writer = DeletionCostWriter(fenced, metrics, may_write=may_write, cluster=cluster,
                                namespaces=written_namespaces(settings)) if settings.deletion_cost else None
    bridge = ReplicaBridge(fenced, namespaces=settings.namespaces, metrics=metrics, may_write=may_write) \
        if bridges_replicas(settings) else None
    acting = " and ".join(part for part, on in (("pod-deletion costs are written", writer is not None),
                                                ("RuntimeScales are bridged", bridge is not None)) if on)
    if elector is not None:

        def leadership_changed(leading: bool) -> None:
            metrics.set_leader(leading)
            if not leading and writer is not None:
                writer.drop_pending()  # writes still queued or in flight belong to a term that is over
            for part in (writer, bridge):  # a new term starts by writing everything; a lost one stops at once
                if part is not None:
                    part.wake()

        elector.add_listener(leadership_changed)
        log.info("%s only while holding Lease %s/%s; identity %s",
                 acting, elector.config.namespace, elector.config.name, identity)
    else:
        log.info("%s (leader election off: run one replica only)", acting)
    actuator = DeletionCostActuator(kube, writer, elector, refresher, metrics, bridge=bridge, fence=fence)
    actuator.start()
    return actuator
