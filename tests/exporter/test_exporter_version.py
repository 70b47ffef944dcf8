"""`--version` of both commands, and the exporter's `modelmesh_exporter_build_info`: which build runs.

Every release printed `0.1.0`, and no series named a sidecar's build, so "keep the adapter and the sidecars on
the same version" (operations.md, Upgrading) could not be checked, nor which pods still ran an old sidecar
during a rollout. Both now name the commit: the image's (the Dockerfile writes `exporter/REVISION`), a checkout's
HEAD, or `unknown`. The image's layout is made here by copying the package beside a REVISION file, as the
Dockerfile's build does, and running that copy as its own process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from exporter import names
from tests.exporter.test_exporter_app import promtool_findings
from tests.exporter.test_exporter_process import exporter_command
from tests.support.processes import free_port, http_get, stop, wait_until_answers

REPO = Path(__file__).resolve().parents[2]
VERSION = "0.1.0"  # pyproject.toml's


def checkout_head() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_both_commands_say_their_version_and_the_commit_of_the_checkout_they_run_from() -> None:
    done = subprocess.run([*exporter_command(), "--version"], capture_output=True, text=True, timeout=60)
    adapter = subprocess.run([sys.executable, "-m", "autoscaler.cli", "--version"], capture_output=True, text=True,
                             timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"modelmesh-exporter {VERSION} (revision {checkout_head()})\n"
    assert adapter.stdout == f"modelmesh-autoscaler {VERSION} (revision {checkout_head()})\n"


def image_layout(tmp_path: Path, revision: str | None) -> dict[str, str]:
    """The package as the image holds it (no checkout around it), with the REVISION the build wrote: the
    environment that runs that copy."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "exporter", site / "exporter", ignore=shutil.ignore_patterns("__pycache__", "REVISION"))
    if revision is not None:
        (site / "exporter" / "REVISION").write_text(f"{revision}\n")
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    return {**inherited, "PYTHONPATH": str(site)}


def copy_version(tmp_path: Path, revision: str | None) -> str:
    done = subprocess.run([sys.executable, "-m", "exporter.cli", "--version"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env=image_layout(tmp_path, revision))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_image_says_the_commit_its_build_wrote(tmp_path: Path) -> None:
    assert copy_version(tmp_path, "0a1b2c3d4e5f") == f"modelmesh-exporter {VERSION} (revision 0a1b2c3d4e5f)\n"


def test_a_build_given_no_commit_says_unknown(tmp_path: Path) -> None:
    assert copy_version(tmp_path, None) == f"modelmesh-exporter {VERSION} (revision unknown)\n"


def test_the_exporters_metrics_name_its_build_and_pass_promtool(tmp_path: Path) -> None:
    port = free_port()
    env = {**image_layout(tmp_path, "0a1b2c3d4e5f"), "EXPORTER_LISTEN": f"127.0.0.1:{port}",
           "EXPORTER_NO_GPU": "true", "EXPORTER_MODELMESH_URL": "http://127.0.0.1:1/metrics"}
    log = tmp_path / "exporter.log"
    with open(log, "wb") as output:  # run from tmp_path: `python -m` puts the working directory (a checkout) first
        exporter = subprocess.Popen([sys.executable, "-m", "exporter.cli"], stdout=output, stderr=subprocess.STDOUT,
                                    cwd=tmp_path, env=env)
    try:
        wait_until_answers(f"http://127.0.0.1:{port}/healthz", exporter, log)
        status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    finally:
        stop(exporter)
    assert status == 200
    assert promtool_findings(body) == (0, "")
    found = [sample for family in text_string_to_metric_families(body) for sample in family.samples
             if sample.name == names.BUILD_INFO]
    assert [(sample.labels, sample.value) for sample in found] == [
        ({"version": VERSION, "revision": "0a1b2c3d4e5f"}, 1.0)]
