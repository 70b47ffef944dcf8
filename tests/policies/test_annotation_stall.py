"""A policy annotation's value is written by whoever controls a Deployment, up to the 256 KiB Kubernetes allows
for all of its annotations: reading one must cost about as much as its length."""

from __future__ import annotations

import logging

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook

TRITON = RuntimeKey("default", "modelmesh-serving-triton")
PREFIX = "autoscaler.modelmesh.io/"
LOGGER = "autoscaler.policies.config"


def test_a_value_as_long_as_kubernetes_allows_is_refused_at_once(caplog: pytest.LogCaptureFixture) -> None:
    """A Deployment's annotations may hold 256 KiB. The hint for a number with a unit (`50ms`) was looked for
    with a pattern that backtracked over every way of splitting a run of digits: 100 KB of them held the refresh
    3 minutes, 256 KiB about 20, for one runtime's annotation (pytest's timeout is what fails this then)."""
    value = "9" * (256 * 1024 - 1) + "x"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        PolicyBook().policy_for(TRITON, {PREFIX + "scale-down-tau-s": value})
    [line] = [record.getMessage() for record in caplog.records]
    assert f"ignoring annotation {PREFIX}scale-down-tau-s=" in line and "scale_down_tau_s must be a number" in line
