"""The start-up line that tells an operator what a `--shutdown-delay` asks of the pod's grace period: the kubelet
SIGKILLs a pod still stopping at its terminationGracePeriodSeconds (30 s in the shipped Deployment), and a delay
that took all of it (`--shutdown-delay 20s`, or `1e12` before the flag had a bound) ended so, with nothing said."""

from __future__ import annotations

import logging

import pytest

from autoscaler import cli
from autoscaler.serve_args import settings_from_args
from autoscaler.stop_budget import say_stop_budget


def said_at_start(argv: list[str], caplog: pytest.LogCaptureFixture) -> list[str]:
    settings = settings_from_args(cli.build_parser().parse_args(["serve", *argv]), {})
    with caplog.at_level(logging.INFO, logger="autoscaler"):
        say_stop_budget(settings)
    return [record.getMessage() for record in caplog.records]


def test_a_shutdown_delay_says_the_grace_period_it_needs(caplog: pytest.LogCaptureFixture) -> None:
    # At the default Lease timings: 7.5 s for the leader's writes in flight and the Lease release, 10 s for the
    # serving workers' stop. 37.5 s is more than the shipped 30 s: the operator learns it before the first SIGKILL.
    assert said_at_start(["--shutdown-delay", "20s"], caplog) == [
        "after SIGTERM this replica serves 20 s more (--shutdown-delay), then takes up to 17.5 s more to stop: the "
        "pod's terminationGracePeriodSeconds must be above 37.5 s, or the kubelet kills it mid-way"]


@pytest.mark.parametrize(("argv", "rest_s"), [
    (["--leader-elect", "false"], 12.5),  # no Lease to release: 2.5 s writes, 10 s workers
    (["--workers", "0"], 7.5),  # no serving workers: 2.5 s writes, 5 s the Lease's read and write
    (["--workers", "0", "--leader-elect", "false"], 2.5),
])
def test_the_grace_period_said_counts_only_what_this_replica_stops(
    argv: list[str], rest_s: float, caplog: pytest.LogCaptureFixture
) -> None:
    [line] = said_at_start(["--shutdown-delay", "20s", *argv], caplog)
    assert f"then takes up to {rest_s:g} s more to stop" in line and f"must be above {20 + rest_s:g} s" in line


def test_no_shutdown_delay_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    assert said_at_start(["--shutdown-delay", "0"], caplog) == []
