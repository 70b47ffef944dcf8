"""A setting given twice, or as a variable under its flag, is named at the exporter's start as at the adapter's.

argparse keeps a flag's last value and a flag wins over its `EXPORTER_*` variable, both without a word: a sidecar
patch that adds `--load-window=60` above the template's `--load-window=30`, or sets `EXPORTER_LOAD_WINDOW=60` under
it, ran at 30 s and said nothing of the 60 its operator asked for."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.processes import free_port, running


def start_log(tmp_path: Path, args: list[str], env: dict[str, str]) -> str:
    port = free_port()
    log = tmp_path / "exporter.log"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    environ.update(EXPORTER_MODELMESH_URL="http://127.0.0.1:1/metrics", EXPORTER_NO_GPU="true", **env)
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", *args], f"http://127.0.0.1:{port}/healthz", log,
                 env=environ):
        pass
    return log.read_text()


@pytest.mark.parametrize(("args", "env", "says"), [
    (["--load-window", "60", "--load-window", "30"], {},
     "--load-window is given more than once, with different values: only the last one is used"),
    (["--load-window", "30"], {"EXPORTER_LOAD_WINDOW": "60"},
     "EXPORTER_LOAD_WINDOW does nothing: --load-window is given too, with another value, and a flag wins over its "
     "variable"),
])
def test_a_value_replaced_by_another_is_named(tmp_path: Path, args: list[str], env: dict[str, str],
                                              says: str) -> None:
    log = start_log(tmp_path, args, env)
    assert says in log, log


def test_the_same_value_twice_says_nothing_of_the_kind(tmp_path: Path) -> None:
    log = start_log(tmp_path, ["--load-window", "30", "--load-window", "30"], {"EXPORTER_LOAD_WINDOW": "30"})
    assert "given more than once" not in log and "does nothing" not in log, log
