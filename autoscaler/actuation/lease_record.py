"""The Lease on the wire: the calls the elector makes (`LeaseStore`), the record it writes (`holder_spec`,
`released_spec`), and the record as this replica last saw it (`SeenLease`).

A Lease held by someone else counts as expired once its record (holder, renewTime, ...) has not changed for
`leaseDurationSeconds` **as measured by this replica's own monotonic clock** from when it first saw that record:
clocks of different machines are never compared. An expired or empty Lease is taken with a conditional PUT (its
resourceVersion), so of two replicas racing for it exactly one succeeds (the other gets 409 Conflict);
`leaseTransitions` counts the changes of holder. On a clean shutdown the leader releases the Lease (empty holder,
1 s duration, `released_spec`), so a follower takes over at its next retry.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

from autoscaler.actuation.lease_said import Term, holder_of, term_of
from autoscaler.actuation.lease_timing import LeaseConfig

if TYPE_CHECKING:  # the raw client imports aiohttp: `serve`'s start-up checks use LeaseConfig without it
    from autoscaler.kube.raw import JSON


class LeaseStore(Protocol):
    """The Lease calls the elector needs (`autoscaler.kube.client.KubeClient` has them)."""

    async def get_lease(self, namespace: str, name: str) -> JSON | None: ...

    async def create_lease(self, namespace: str, lease: JSON) -> JSON: ...

    async def replace_lease(self, namespace: str, name: str, lease: JSON) -> JSON: ...


def holder_spec(config: LeaseConfig, *, acquire_time: str, renew_time: str, transitions: int) -> JSON:
    """The record of a Lease `config.identity` holds."""
    return {
        "holderIdentity": config.identity,
        "leaseDurationSeconds": max(1, math.ceil(config.lease_duration_s)),
        "acquireTime": acquire_time,
        "renewTime": renew_time,
        "leaseTransitions": transitions,
    }


def new_lease(config: LeaseConfig, spec: JSON) -> JSON:
    """The Lease object to create where there is none."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": config.name, "namespace": config.namespace}, "spec": spec}


def released_spec(spec: JSON, wall: str) -> JSON:
    """The record of a Lease given up: no holder, 1 s duration, the transitions kept (client-go does the same)."""
    return {"leaseDurationSeconds": 1, "acquireTime": wall, "renewTime": wall,
            "leaseTransitions": int(spec.get("leaseTransitions") or 0)}


class SeenLease:
    """The Lease record as this replica last read or wrote it, and when it last changed by its own clock."""

    def __init__(self) -> None:
        self.spec: JSON | None = None  # the last Lease spec we read or wrote
        self.changed_at = -math.inf  # our monotonic time when that spec last changed
        self.last_term: Term | None = None  # the last holder (and its leaseTransitions) read in the Lease

    @property
    def holder(self) -> str | None:
        """The holder named in the Lease as last seen (None: never read, or empty)."""
        return holder_of(self.spec) or None

    def observe(self, lease: JSON, now: float) -> None:
        """`lease` was read or written at `now`: a changed record starts its duration anew."""
        spec = lease.get("spec") or {}
        if spec != self.spec:
            self.spec = spec
            self.changed_at = now
            self.last_term = term_of(spec) or self.last_term

    def expired(self, now: float) -> bool:
        duration = float((self.spec or {}).get("leaseDurationSeconds") or 0)
        return self.changed_at + duration <= now

    def held_by_other(self, identity: str, now: float) -> bool:
        """Whether the record last seen names a holder other than `identity` and has not expired."""
        holder = self.holder
        return holder is not None and holder != identity and not self.expired(now)
