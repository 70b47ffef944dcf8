"""Leader-election durations that cannot work together stop `serve` before it serves, in one `cannot start:`
line, as the other rules between flags do (the rules under docs/configuration.md, modelmesh-autoscaler serve)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler import cli
from autoscaler.preflight import check_startup
from autoscaler.serve_args import settings_from_args
from tests.support.processes import TEST_PROCESS_ENV

REPO = Path(__file__).resolve().parent.parent

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: default}}]
current-context: c
"""

TARGETS = """runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods:
      - {name: demo-0, url: "http://127.0.0.1:1/metrics"}
"""


def serve(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    (tmp_path / "targets.yaml").write_text(TARGETS)
    return subprocess.run(
        [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", "127.0.0.1:0",
         "--kubeconfig", str(tmp_path / "kubeconfig"), "--targets", str(tmp_path / "targets.yaml"),
         "--leader-elect", "true", *flags],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, **TEST_PROCESS_ENV, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize(("flags", "says"), [
    (["--leader-elect-renew-deadline", "20"],
     "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"),
    (["--leader-elect-lease-duration", "10"],
     "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"),
    (["--leader-elect-retry-period", "9"],
     "--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period"),
], ids=["renew-deadline-past-lease", "lease-shorter-than-deadline", "retry-too-slow-to-renew"])
def test_durations_that_cannot_elect_stop_the_start_before_serving(flags: list[str], says: str,
                                                                   tmp_path: Path) -> None:
    """It logged `serving external.metrics.k8s.io on ...`, then `cannot start:` from the refresh process: in a
    pod, a log that says it serves before the pod exits."""
    done = serve(tmp_path, *flags)
    assert done.returncode == 2, done.stderr
    assert "serving external.metrics.k8s.io" not in done.stderr, done.stderr
    [line] = [line for line in done.stderr.splitlines() if "cannot start" in line]
    assert line.endswith(f"cannot start: {says}"), line


def test_the_rules_apply_only_where_a_lease_is_elected(tmp_path: Path) -> None:
    """`--leader-elect false` uses none of the three durations: nothing to refuse."""
    (tmp_path / "targets.yaml").write_text(TARGETS)
    args = cli.build_parser().parse_args(
        ["serve", "--insecure-dev", "--listen", "127.0.0.1:0", "--targets", str(tmp_path / "targets.yaml"),
         "--leader-elect", "false", "--leader-elect-renew-deadline", "20"])
    check_startup(settings_from_args(args, environ={}))
