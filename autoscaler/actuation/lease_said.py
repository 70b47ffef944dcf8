"""What the elector's log says of a Lease record (the `spec` of a `coordination.k8s.io/v1` Lease:
`holderIdentity`, `leaseDurationSeconds`, `acquireTime`, `renewTime`, `leaseTransitions`).

A failover is read from the surviving replica's log, so its lines name the holder and say how the Lease came
free: released (no `holderIdentity`: the holder stopped cleanly) or expired (its record unchanged for its
`leaseDurationSeconds`: the holder died or lost the API server). A releasing holder empties `holderIdentity` but
keeps `leaseTransitions` (client-go does the same), and every change of holder counts one transition more: a
released record with the transitions of a term this replica saw was released by that term's holder. Whoever may
update the Lease writes its holderIdentity, so a holder is named as a backend's words are (`told`: on one line,
cut short).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoscaler.backend_said import told
from autoscaler.kube.timestamps import micro_time, posix_seconds

if TYPE_CHECKING:
    from autoscaler.kube.raw import JSON


@dataclass(frozen=True, slots=True)
class Term:
    """A holder and the `leaseTransitions` of its term, as this replica last read them."""

    holder: str
    transitions: int


@dataclass(frozen=True, slots=True)
class Takeover:
    """How this replica came to hold the Lease, and at which level the log says it."""

    level: int
    how: str


def holder_of(spec: JSON | None) -> str:
    """The record's holder; "" when it names none (released, or never held)."""
    holder = (spec or {}).get("holderIdentity")
    return holder if isinstance(holder, str) else ""


def term_of(spec: JSON) -> Term | None:
    """The holder's term the record shows; None for a record that names no holder."""
    holder = holder_of(spec)
    return Term(holder, transitions_of(spec)) if holder else None


def named(holder: str) -> str:
    """A holder as the log names it."""
    return told(holder)


def transitions_of(spec: JSON) -> int:
    value = spec.get("leaseTransitions")
    return value if isinstance(value, int) else 0


def renewed_until(spec: JSON) -> str:
    """When the record last moved and when it runs out by the holder's own clock (`renewTime` plus
    `leaseDurationSeconds`). A follower never compares that clock with its own (it counts the duration from when
    it saw the record change), so the expiry is what the holder promised, for reading beside its log."""
    duration = spec.get("leaseDurationSeconds")
    renewed = spec.get("renewTime")
    since = posix_seconds(renewed)
    if since is None or not isinstance(duration, int):
        return f"renewTime {renewed or 'not set'}, leaseDurationSeconds {duration}"
    return f"renewed {renewed}: expires {micro_time(since + duration)} unless renewed (leaseDurationSeconds {duration})"


def took_over(spec: JSON | None, *, identity: str, unchanged_for_s: float, released_by: Term | None,
              deleted: bool = False) -> Takeover:
    """Why this replica could take the Lease whose record, as it last read it, was `spec` (None: there was no
    Lease; `deleted`: there is none now, and `spec` is the last one it saw). An expired Lease is a WARNING: a
    replica died, or lost the API server, without letting go."""
    holder = holder_of(spec)
    if spec is None or (deleted and holder in ("", identity)):
        return Takeover(logging.INFO, ": it created the Lease (there was none)")
    if holder == identity:
        return Takeover(logging.INFO, " again: its own Lease, renewed after its renew deadline had passed")
    if not holder:
        if released_by is not None and released_by.transitions == transitions_of(spec):
            return Takeover(logging.INFO, f", taking over the Lease {named(released_by.holder)} released")
        return Takeover(logging.INFO, ", taking over a released Lease")
    shown = named(holder)
    lapse = (f"not renewed for {unchanged_for_s:.1f} s, past its leaseDurationSeconds of "
             f"{spec.get('leaseDurationSeconds')}; last renewTime {spec.get('renewTime') or 'not set'}")
    if deleted:
        return Takeover(logging.WARNING, f", creating the Lease again: it was deleted while {shown} held it ({lapse})")
    return Takeover(logging.WARNING, f", taking over from {shown}: the Lease expired ({lapse})")
