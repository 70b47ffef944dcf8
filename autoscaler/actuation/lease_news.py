"""What the elector says of the Lease, and when (`LeaseNews`); `autoscaler.actuation.lease_said` words it.

A failover is read from the surviving replica's log: a follower names the holder once, with its record's expiry
(`renewTime` + `leaseDurationSeconds`), and again only when the holder changes; the line that says it leads names
the previous holder and why it could take over: released (INFO) or expired (WARNING: a replica died, or lost the
API server, without letting go). Attempts come every retry period (2 s by default): a failure is a warning when it
starts or changes (missing RBAC, an API server down), not at every attempt; a routine one (a lost race) never.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from autoscaler.actuation.lease_record import SeenLease
from autoscaler.actuation.lease_said import Takeover, holder_of, named, renewed_until, took_over
from autoscaler.actuation.lease_timing import LeaseConfig

if TYPE_CHECKING:
    from autoscaler.kube.raw import JSON

log = logging.getLogger("autoscaler.actuation.leader")


class LeaseNews:
    """The elector's lines about one Lease, each said once while it holds."""

    def __init__(self, config: LeaseConfig) -> None:
        self._config = config
        self._announced = ""  # the holder this replica, waiting, last named in the log
        self._takeover: Takeover | None = None  # how the last attempt that was no renewal took the Lease
        self._failing: str | None = None  # the last failed attempt's error, until the API answers again

    def waiting(self) -> None:
        """This replica starts trying to acquire: the holder is named again."""
        cfg = self._config
        self._announced = ""
        log.info("lease %s/%s: %s trying to acquire", cfg.namespace, cfg.name, cfg.identity)

    def holder(self, spec: JSON, *, leading: bool) -> None:
        """Name the holder once while waiting, and again only when it changes: attempts come every retry
        period, and a line each said nothing new, while a failover read from the log needs who held the Lease and
        until when."""
        holder = holder_of(spec)
        if leading or holder == self._announced:
            return
        held = f"now held by {named(holder)} (was {named(self._announced)})" if self._announced \
            else f"held by {named(holder)}"
        self._announced = holder
        cfg = self._config
        log.info("lease %s/%s: %s, %s; %s waits", cfg.namespace, cfg.name, held, renewed_until(spec), cfg.identity)

    def takeover(self, spec: JSON | None, seen: SeenLease, now: float, *, leading: bool,
                 deleted: bool = False) -> None:
        """Keep how this attempt may take the Lease, for the line that says this replica leads (none while it
        leads: then the attempt is a renewal)."""
        if not leading:
            self._takeover = took_over(spec, identity=self._config.identity, unchanged_for_s=now - seen.changed_at,
                                       released_by=seen.last_term, deleted=deleted)

    def answered(self) -> None:
        """A whole attempt went through. Only that: a read that works while the write is refused (RBAC without
        create or update) is no recovery, and logging it as one said "answers again" and the refusal anew every
        retry period."""
        if self._failing is not None:
            log.info("lease %s/%s: the API answers again", self._config.namespace, self._config.name)
            self._failing = None

    def failed(self, message: str, *, routine: bool = False) -> None:
        """Log a failed attempt. Attempts come every retry period (2 s by default): a failure is a warning when
        it starts or changes (missing RBAC, an API server down), not at every attempt; a routine one never."""
        repeated = message == self._failing
        if not routine:  # a lost race is no failure to recover from
            self._failing = message
        log.log(logging.DEBUG if routine or repeated else logging.WARNING, "lease %s/%s: %s",
                self._config.namespace, self._config.name, message)

    def leadership(self, leader: bool) -> None:
        """This replica became the leader (and how it took the Lease), or stopped leading."""
        cfg = self._config
        if leader:
            took = self._takeover or Takeover(logging.INFO, "")
            log.log(took.level, "lease %s/%s: %s became the leader%s", cfg.namespace, cfg.name, cfg.identity, took.how)
        else:
            log.info("lease %s/%s: %s stopped leading", cfg.namespace, cfg.name, cfg.identity)
