"""The demo's /debug/runtimes warning about deletion costs speaks to the demo's user.

The demo's adapter runs with `--targets` and no Kubernetes API, so its runtime's `warnings` said the costs are
written on no pod and to "give --kubeconfig (or run in the cluster) to write them": a flag `modelmesh-autoscaler
demo` does not have, for costs the demo reads itself, playing the ReplicaSet (`autoscaler.demo.removals`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from autoscaler.actuation.writes_off import unwritten_costs_warning
from autoscaler.cli import build_parser
from autoscaler.demo.fleet import DemoFleet
from autoscaler.serve_args import settings_from_args


def test_the_demo_adapters_warning_says_the_demo_removes_its_pods_by_these_costs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # as on the user's machine
    fleet = DemoFleet(Path(tempfile.gettempdir()), {})
    settings = settings_from_args(build_parser().parse_args(["serve", *fleet.adapter_arguments()]))
    warning = unwritten_costs_warning(settings)
    assert warning is not None
    assert "modelmesh-autoscaler demo removes its pods by these costs itself" in warning, warning
    assert "give --kubeconfig" not in warning, warning
