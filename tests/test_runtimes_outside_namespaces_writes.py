"""The start-up warning about a policy-file runtime outside `--namespaces` names deletion costs among what the runtime
lacks exactly when they are written elsewhere: with `--deletion-cost off` nobody's pods get one, and saying so of
this runtime's would send the operator looking for a difference that is not there. The real `serve` says it, and
writes nothing there, in tests/e2e/test_no_writes_outside_namespaces.py."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.runtimes_outside_namespaces import runtimes_outside_namespaces
from autoscaler.settings import ServeSettings

OUTSIDE = RuntimeKey("team-c", "modelmesh-serving-triton")


@given(deletion_cost=st.booleans(), bridge=st.sampled_from([None, False]))
def test_deletion_costs_are_named_as_lacking_only_where_they_are_written(deletion_cost: bool,
                                                                          bridge: bool | None) -> None:
    settings = ServeSettings(namespaces=("team-a",), config=Path("policy.yaml"), deletion_cost=deletion_cost,
                             bridge=bridge)

    warning = runtimes_outside_namespaces(settings, [OUTSIDE])

    assert warning is not None
    said = "no pod-deletion cost is written on its pods: the adapter writes nothing outside --namespaces;"
    assert (said in warning) == deletion_cost, warning
