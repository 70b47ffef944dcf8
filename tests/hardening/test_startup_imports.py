"""What `serve` loads to start. The Kubernetes library takes a third of a second or more of CPU to import (its
client's models), in every adapter process; `serve --targets FILE` outside a cluster (the demo's adapter) has
nothing to say to Kubernetes, so it never imports it. Read from Python's own import log
(`PYTHONPROFILEIMPORTTIME`), of every process the adapter runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hardening.adapter import write_targets
from tests.support.ports import free_port
from tests.support.processes import poll, running

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_with_a_targets_file_outside_a_cluster_never_imports_the_kubernetes_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: str,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    port = free_port()
    targets = write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics"])
    log = tmp_path / "adapter.log"
    with running(["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
                  "--targets", str(targets), "--workers", workers],
                 f"https://127.0.0.1:{port}/healthz", log, env={"PYTHONPROFILEIMPORTTIME": "1"}):
        poll(lambda: "serving metrics only" in log.read_text(), timeout=30)  # the writing side decided
    imported = {line.rsplit("|", 1)[1].strip() for line in log.read_text().splitlines()
                if line.startswith("import time:")}
    assert "aiohttp" in imported  # the import log is there: what serving needs was loaded
    assert sorted(name for name in imported if name.split(".")[0] == "kubernetes") == []
