"""`--deletion-cost off`, as /debug shows it: no pod-deletion cost is written, so none is shown as if it were.

Before, each pod's `deletion_cost` showed the ranking's cost all the same (0 / 900 on pods nobody annotated),
which a platform engineer reads as the order the ReplicaSet removes pods in. The ranking itself is still
shown, as each pod's `need`; the values the HPA reads do not depend on the setting."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import DataPath, another_adapter, data_path_running
from tests.e2e.test_missing_signal_e2e import debug_runtime
from tests.e2e.test_unique_copies_e2e import ONLY_UNIQUE_COPIES, shown
from tests.support.processes import poll

pytestmark = pytest.mark.slow

UNEVEN = [["--model-prefix", "alone"], ["--model-prefix", "shared"], ["--model-prefix", "shared"]]
"""pod-0 alone serves its models, pod-1 and pod-2 share theirs: needs 1, 0, 0 (costs 900, 0, 0 where written)."""


@pytest.fixture(scope="module")
def uneven(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataPath]:
    """The `UNEVEN` pods, read by an adapter at the default `--deletion-cost`. No test changes the pods, so they
    are started once; each setting of `--deletion-cost` is an adapter of its own (`another_adapter`)."""
    with data_path_running(tmp_path_factory.mktemp("uneven"), pods=3, rps=30.0, policy=ONLY_UNIQUE_COPIES,
                           modelmesh_args=UNEVEN) as path:
        yield path


@pytest.mark.parametrize(("spelling", "env"), [(["--deletion-cost", "off"], {}),
                                               ([], {"AUTOSCALER_DELETION_COST": "off"})])
def test_deletion_cost_off_shows_each_pods_need_and_a_null_deletion_cost(
        uneven: DataPath, tmp_path: Path, spelling: list[str], env: dict[str, str]) -> None:
    with another_adapter(uneven, tmp_path, spelling, ONLY_UNIQUE_COPIES, env) as path:
        with contextlib.suppress(AssertionError):  # said below, with the needs seen last
            poll(lambda: shown(path, "need") == {"pod-0": 1.0, "pod-1": 0.0, "pod-2": 0.0}, timeout=30)
        assert shown(path, "need") == {"pod-0": 1.0, "pod-1": 0.0, "pod-2": 0.0}
        assert shown(path, "deletion_cost") == {"pod-0": None, "pod-1": None, "pod-2": None}
        assert debug_runtime(path)["known"] is True
        code, desired = path.served("modelmesh_desired_replicas")
        assert code == 0 and isinstance(desired, float) and desired >= 1, desired


def test_costs_no_api_can_take_are_shown_as_the_ones_the_adapter_would_write_and_said_to_be_unwritten(
        uneven: DataPath) -> None:
    path = uneven
    with contextlib.suppress(AssertionError):  # said below, with the costs seen last
        poll(lambda: shown(path, "deletion_cost") == {"pod-0": 900, "pod-1": 0, "pod-2": 0}, timeout=30)
    assert shown(path, "deletion_cost") == {"pod-0": 900, "pod-1": 0, "pod-2": 0}
    warnings = [str(warning) for warning in debug_runtime(path)["warnings"]]  # type: ignore[attr-defined]
    said = [warning for warning in warnings if "pod-deletion costs cannot be written" in warning]
    assert len(said) == 1, warnings
    assert "--kubeconfig" in said[0] and "deletion_cost" in said[0] and "--deletion-cost off" in said[0], said
