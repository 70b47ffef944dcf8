"""How long a replica takes to stop after SIGTERM, and the start-up line that says so where `--shutdown-delay`
makes it matter.

The kubelet SIGKILLs a pod still running `terminationGracePeriodSeconds` after its SIGTERM (30 s in the shipped
Deployment). The adapter cannot read that grace period (the downward API does not give it), so the one place a
delay too long for it can be told is the start: `--shutdown-delay 1e12` took the first SIGTERM and served on until
the SIGKILL, and a delay of 20 s with the shipped grace period was killed mid-way the same, with nothing said.
tests/manifests checks the shipped Deployment against the same `stop_budget_s`.
"""

from __future__ import annotations

import logging

from autoscaler.actuation.lease_timing import client_timeout_s
from autoscaler.settings import ServeSettings
from autoscaler.worker_pool import STOP_TIMEOUT_S

log = logging.getLogger(__name__)


def rest_of_stop_s(settings: ServeSettings) -> float:
    """The most a stop takes besides `--shutdown-delay`: the writes in flight (one client timeout,
    autoscaler/actuation/write_fence.py), the Lease release where it holds one (a read and a write, each within the
    client timeout; `--leader-elect` unset counts as set: in a cluster it is), then the serving workers' stop where
    it has any (one deadline for all of them, autoscaler/worker_pool.py). Counting parts a replica does not have
    told `--workers 0 --leader-elect false` a grace period 15 s longer than it needs."""
    client_s = client_timeout_s(settings.leader_elect_lease_duration_s, settings.leader_elect_renew_deadline_s)
    lease_release_s = 0.0 if settings.leader_elect is False else 2 * client_s
    workers_stop_s = STOP_TIMEOUT_S if settings.workers > 0 else 0.0
    return client_s + lease_release_s + workers_stop_s


def stop_budget_s(settings: ServeSettings) -> float:
    """The most a stop takes after SIGTERM: what the pod's terminationGracePeriodSeconds must exceed."""
    return rest_of_stop_s(settings) + settings.shutdown_delay_s


def say_stop_budget(settings: ServeSettings) -> None:
    """With a `--shutdown-delay`, say at start what the pod's grace period must exceed: nothing else tells an
    operator that the delay they chose ends in a SIGKILL."""
    if settings.shutdown_delay_s > 0:
        log.info("after SIGTERM this replica serves %g s more (--shutdown-delay), then takes up to %g s more to stop: "
                 "the pod's terminationGracePeriodSeconds must be above %g s, or the kubelet kills it mid-way",
                 settings.shutdown_delay_s, rest_of_stop_s(settings), stop_budget_s(settings))
