"""Wires the acting side of `serve` from its settings: whether pod-deletion costs are written at all, the
Kubernetes connection, leader election and the writer, started and stopped with the app (docs/design.md).

The rules, so that an adapter never writes where nobody asked it to:
- `--deletion-cost=off`: nothing here runs and the adapter makes no Kubernetes writes at all.
- Where to write: the `--kubeconfig` when one is given; else, in a cluster, the pod's service account; else,
  when pods are discovered in Kubernetes (no `--targets`), the default kubeconfig. With `--targets`, no
  `--kubeconfig` and no cluster there is nowhere to write: one log line at start, then metrics only. (A
  developer's `~/.kube/config` is never used behind their back for a targets file.)
- A `--kubeconfig` that cannot be loaded stops start-up; a missing default one only disables writing.
- `--leader-elect` defaults to on in a cluster (replicas behind one Service) and off outside one. Without it
  this replica writes alone. The Lease lives in `--leader-elect-namespace`, else the pod's namespace (or the
  kubeconfig context's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from aiohttp import web

from autoscaler import __version__
from autoscaler.actuation.deletion_cost import DeletionCostWriter
from autoscaler.actuation.leader import LeaseConfig, LeaseElector
from autoscaler.kube.client import KubeClient, KubeConfigError, in_cluster
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings

log = logging.getLogger(__name__)


def leader_identity() -> str:
    """Unique per process, readable per pod: the host name (the pod name in a cluster) and a random suffix,
    as client-go's controllers do, so a restarted pod never mistakes its predecessor's Lease for its own."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass
class DeletionCostActuator:
    """The running writer (and elector): started by `start_actuator`, stopped by `stop()`."""

    kube: KubeClient
    writer: DeletionCostWriter
    elector: LeaseElector | None
    refresher: Refresher
    metrics: AdapterMetrics
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        self.refresher.listeners.append(self.writer.on_refresh)
        self.tasks.append(asyncio.create_task(self.writer.run(), name="deletion-cost-writer"))
        if self.elector is not None:
            self.tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))
        else:
            self.metrics.leader.set(1)

    async def stop(self) -> None:
        """Stop writing first, then give the Lease up (the elector releases it when cancelled), then close."""
        with contextlib.suppress(ValueError):
            self.refresher.listeners.remove(self.writer.on_refresh)
        for task in self.tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.metrics.leader.set(0)
        await self.kube.close()


async def start_actuator(
    settings: ServeSettings, refresher: Refresher, metrics: AdapterMetrics, *, identity: str | None = None
) -> DeletionCostActuator | None:
    """Start writing deletion costs as the settings say, or return None (after saying why in the log)."""
    if not settings.deletion_cost:
        log.info("--deletion-cost=off: pod-deletion costs are not written; serving metrics only")
        return None
    if settings.kubeconfig is None and settings.targets is not None and not in_cluster():
        log.warning("pod-deletion costs cannot be written: --targets without --kubeconfig outside a cluster "
                    "names no Kubernetes API; serving metrics only")
        return None
    identity = identity or leader_identity()
    try:
        kube = await KubeClient.connect(
            settings.kubeconfig, user_agent=f"modelmesh-autoscaler/{__version__} ({identity})"
        )
    except KubeConfigError as error:
        if settings.kubeconfig is not None:
            raise
        log.warning("pod-deletion costs are not written (serving metrics only): %s", error)
        return None
    elector: LeaseElector | None = None
    if settings.leader_elect if settings.leader_elect is not None else in_cluster():
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
    may_write: Callable[[], bool] = (lambda: elector.is_leader) if elector is not None else (lambda: True)
    writer = DeletionCostWriter(kube, metrics, may_write=may_write)
    if elector is not None:

        def leadership_changed(leading: bool) -> None:
            metrics.leader.set(1 if leading else 0)
            writer.wake()  # a new term starts by writing every pod; a lost one stops at once

        elector.add_listener(leadership_changed)
        log.info("pod-deletion costs are written only while holding Lease %s/%s; identity %s",
                 elector.config.namespace, elector.config.name, identity)
    else:
        log.info("writing pod-deletion costs (leader election off: run one replica only)")
    actuator = DeletionCostActuator(kube, writer, elector, refresher, metrics)
    actuator.start()
    return actuator


def deletion_cost_context(
    settings: ServeSettings, refresher: Refresher, metrics: AdapterMetrics
) -> Callable[[web.Application], AsyncIterator[None]]:
    """An `app.cleanup_ctx` entry: start the actuator with the app, stop it (releasing the Lease) at shutdown."""

    async def context(app: web.Application) -> AsyncIterator[None]:
        actuator = await start_actuator(settings, refresher, metrics)
        yield
        if actuator is not None:
            await actuator.stop()

    return context
