"""`modelmesh-exporter` run by hand and stopped with Ctrl-C during its start-up: one line, no traceback."""

from __future__ import annotations

import sys

import pytest

from tests.support.ports import free_port
from tests.support.terminal import ctrl_c_after, moment_of_start_up

pytestmark = pytest.mark.slow


def exporter() -> list[str]:
    return [sys.executable, "-m", "exporter.cli", "--no-gpu", "--listen", f"127.0.0.1:{free_port()}",
            "--modelmesh-url", "http://127.0.0.1:1/metrics"]


@pytest.mark.parametrize("share", [0.1, 0.4, 0.7, 1.5])
def test_ctrl_c_while_starting_is_one_line_never_a_traceback(share: float) -> None:
    """While Python imports aiohttp and prometheus_client (about a second here) Ctrl-C ends the exporter with
    status 130 and 'interrupted.'; once it serves, aiohttp stops it with status 0. The moments are shares of
    this machine's start-up time, so that a loaded machine moves them with it."""
    delay = moment_of_start_up(exporter(), "serving on", share)
    run = ctrl_c_after(exporter(), delay)
    assert "Traceback" not in run.output and "KeyboardInterrupt" not in run.output, run.output
    assert (run.ended_by_ctrl_c and run.output.strip().splitlines()[-1] == "interrupted.") or (
        run.returncode == 0 and "stopping" in run.output), run.output
    assert run.left == []
