"""Every seconds-valued flag of every command takes the same forms, and every switch can be turned off.

`serve --prometheus-timeout 5s` was taken while `serve --refresh-interval 30s` (and the exporter's
`--load-window 30s`) was refused: which flag took a unit depended on whether `--help` called it DURATION or
SECONDS. And a switch had no off form: a Deployment setting `EXPORTER_NO_GPU=true` or
`EXPORTER_MODELMESH_INSECURE=true` could not be undone by its args, nor `--no-gpu` in the args by a variable.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler import cli
from autoscaler.serve_args import settings_from_args
from exporter.settings import build_parser as exporter_parser
from exporter.settings import parse_settings
from tests.support.ports import free_port
from tests.support.processes import running

REPO = Path(__file__).resolve().parent.parent
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, by the name a user types."""
    top = cli.build_parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return {"modelmesh-exporter": exporter_parser(),
            **{f"modelmesh-autoscaler {name}": parser for name, parser in commands.choices.items()}}


def flags_taking(metavar: str) -> list[tuple[str, argparse.Action]]:
    return [(f"{command} {action.option_strings[0]}", action) for command, parser in parsers().items()
            for action in parser._actions if action.metavar == metavar]


SECONDS_FLAGS = flags_taking("SECONDS")
SWITCHES = [(f"{command} {action.option_strings[0]}", action) for command, parser in parsers().items()
            for action in parser._actions
            if action.nargs == 0 and action.dest not in ("help", "version", "synthetic")]


def test_no_flag_takes_seconds_under_another_name() -> None:
    """One name in `--help` for one set of forms: DURATION flags took `5s`, SECONDS flags refused it."""
    assert flags_taking("DURATION") == []
    assert {"modelmesh-autoscaler serve --refresh-interval", "modelmesh-autoscaler serve --prometheus-timeout",
            "modelmesh-exporter --load-window", "modelmesh-autoscaler simulate --tick",
            "modelmesh-autoscaler demo --duration"} <= {name for name, _ in SECONDS_FLAGS}
    for command, parser in parsers().items():
        if any(action.metavar == "SECONDS" for action in parser._actions):
            description = " ".join((parser.description or "").split())
            assert "SECONDS is a number of seconds, or one with a unit: 500ms, 30s, 5m, 1h" in description, command


@pytest.mark.parametrize(("flag", "action"), SECONDS_FLAGS, ids=[name for name, _ in SECONDS_FLAGS])
def test_every_seconds_flag_takes_a_minute_written_with_its_unit(flag: str, action: argparse.Action) -> None:
    convert = action.type
    assert callable(convert)
    assert convert("1m") == convert("60") == 60.0
    assert convert("1.5s") == convert("1.5")
    try:
        convert("0.5")
    except argparse.ArgumentTypeError:  # below the flag's own range (`demo --interval`: 1 to 600 s)
        with pytest.raises(argparse.ArgumentTypeError, match="500ms"):
            convert(" 500ms ")
    else:
        assert convert(" 500ms ") == pytest.approx(0.5)


@given(number=st.floats(min_value=0, max_value=1e6, allow_nan=False), unit=st.sampled_from(sorted(UNITS)),
       index=st.integers(min_value=0, max_value=len(SECONDS_FLAGS) - 1))
def test_a_value_with_a_unit_is_the_same_as_its_seconds_written_bare(number: float, unit: str, index: int) -> None:
    """For every seconds flag: `N<unit>` is taken exactly where its seconds written as a bare number are, and as
    the same value (or both refused, by the flag's own range)."""
    flag, action = SECONDS_FLAGS[index]
    convert = cast(Callable[[str], float], action.type)
    text = f"{number!r}{unit}"
    bare = repr(float(text.removesuffix(unit)) * UNITS[unit])
    outcomes: list[float | None] = []
    for value in (text, bare):
        try:
            outcomes.append(convert(value))
        except argparse.ArgumentTypeError:
            outcomes.append(None)
    with_unit, without = outcomes
    assert (with_unit is None) == (without is None), (flag, text, bare, outcomes)
    if with_unit is not None and without is not None:
        assert math.isclose(with_unit, without, rel_tol=1e-12, abs_tol=1e-12), (flag, text, bare)


def stated_range(action: argparse.Action) -> tuple[float, float] | None:
    """The range a flag's `--help` states ("0.1 to 3600"), if any."""
    found = re.findall(r"(\d+(?:\.\d+)?) to (\d+(?:\.\d+)?)", action.help or "")
    return (float(found[0][0]), float(found[0][1])) if found else None


RANGED_SECONDS_FLAGS = [(flag, action) for flag, action in SECONDS_FLAGS if stated_range(action) is not None]


def test_the_durations_that_ran_for_ever_state_their_range() -> None:
    """`serve --scrape-timeout 1e9`, `--keepalive-timeout 1e12`, `--header-read-timeout 1e12`, `--shutdown-delay
    1e12` and the exporter's `--modelmesh-timeout`, `--gpu-window`, `--gpu-interval 1e9` were taken and waited for
    ever (the shutdown delay until the kubelet's SIGKILL), where their neighbours refused such a value."""
    serve, exporter = "modelmesh-autoscaler serve", "modelmesh-exporter"
    assert {f"{serve} --scrape-timeout", f"{serve} --keepalive-timeout", f"{serve} --header-read-timeout",
            f"{serve} --shutdown-delay", f"{exporter} --modelmesh-timeout", f"{exporter} --gpu-window",
            f"{exporter} --gpu-interval"} <= {flag for flag, _ in RANGED_SECONDS_FLAGS}


def test_every_duration_of_every_command_states_its_range() -> None:
    """The webhook cache TTLs, `--prometheus-timeout`, `--window`, `--max-staleness` and the exporter's
    `--gpu-pod-resources-wait` took 1e12 (a revoked token honoured, a dead Prometheus or kubelet waited on, a dead
    exporter's pod counted fresh, for ever); `--leader-elect-lease-duration 1e300` was refused by the API server at
    every attempt (leaseDurationSeconds is an int32), `simulate --tick 1e300` stopped with an OverflowError."""
    unranged = {flag for flag, action in SECONDS_FLAGS if stated_range(action) is None}
    assert unranged == set()


@given(interval=st.floats(min_value=0.1, max_value=3600.0, allow_nan=False))
def test_the_staleness_that_follows_any_refresh_interval_is_one_the_policy_takes(interval: float) -> None:
    """Left unset, `max_staleness_s` is three refresh intervals: a range below that refused `serve
    --refresh-interval 1h` at start for a setting it was never given."""
    from autoscaler.server import policy_book

    parser = cli.build_parser()
    settings = settings_from_args(parser.parse_args(["serve", "--refresh-interval", repr(interval)]), {})
    assert policy_book(settings).defaults.max_staleness_s == 3 * interval


@given(index=st.integers(min_value=0, max_value=len(RANGED_SECONDS_FLAGS) - 1),
       seconds=st.one_of(st.floats(min_value=0, max_value=1e13, allow_nan=False),
                         st.sampled_from([0.0, 0.1, 300.0, 3600.0, 3600.0001, 1e9, 1e12])))
def test_a_ranged_duration_takes_exactly_the_range_its_help_states(index: int, seconds: float) -> None:
    """What `--help` (and docs/configuration.md) says a flag takes is what it takes: within, the value as given;
    outside, the one line "must be A to B seconds" naming the same bounds."""
    flag, action = RANGED_SECONDS_FLAGS[index]
    lowest, highest = cast(tuple[float, float], stated_range(action))
    convert = cast(Callable[[str], float], action.type)
    if lowest <= seconds <= highest:
        assert convert(repr(seconds)) == seconds, flag
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=f"^must be {lowest:g} to {highest:g} seconds, got "):
            convert(repr(seconds))


def test_serve_takes_a_refresh_interval_in_seconds_with_a_unit_from_its_flag_and_its_variable() -> None:
    parser = cli.build_parser()
    assert settings_from_args(parser.parse_args(["serve", "--refresh-interval", "30s"]), {}).refresh_interval_s == 30
    assert settings_from_args(parser.parse_args(["serve"]), {"AUTOSCALER_REFRESH_INTERVAL": "1m"}
                              ).refresh_interval_s == 60
    assert settings_from_args(parser.parse_args(["serve"]), {"AUTOSCALER_LEADER_ELECT_LEASE_DURATION": "30s"}
                              ).leader_elect_lease_duration_s == 30


def test_the_exporter_runs_with_a_load_window_written_with_its_unit(tmp_path: Path) -> None:
    """As a sidecar's manifest writes it: `EXPORTER_LOAD_WINDOW=1m`, `--modelmesh-interval 5s`."""
    port, log = free_port(), tmp_path / "exporter.log"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    environ.update(EXPORTER_LOAD_WINDOW="1m", EXPORTER_NO_GPU="true")
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--modelmesh-url", "http://127.0.0.1:1/metrics",
                  "--modelmesh-interval", "5s"], f"http://127.0.0.1:{port}/healthz", log, env=environ):
        pass
    assert "every 5 s" in log.read_text() and "load window 60 s" in log.read_text(), log.read_text()


def test_a_seconds_value_that_is_no_duration_says_the_forms_taken(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--refresh-interval",
                           "30 sec"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2
    assert done.stderr.strip() == ("modelmesh-autoscaler serve: error: argument --refresh-interval: expected a number "
                                   "of seconds, got '30 sec' (a number of seconds, or one with a unit: 500ms, 30s, "
                                   "5m, 1h)"), done.stderr


@pytest.mark.parametrize(("flag", "action"), SWITCHES, ids=[name for name, _ in SWITCHES])
def test_every_switch_has_an_off_form(flag: str, action: argparse.Action) -> None:
    on, *off = action.option_strings
    assert len(off) == 1, f"{flag}: no way to say false"
    parser = argparse.ArgumentParser()
    parser._add_action(action)
    assert getattr(parser.parse_args([on]), action.dest) is True
    assert getattr(parser.parse_args(off), action.dest) is False
    assert getattr(parser.parse_args([on, *off]), action.dest) is False  # the last one given wins


@pytest.mark.parametrize(("argv", "environ", "gpu", "insecure"), [
    (["--gpu"], {"EXPORTER_NO_GPU": "true"}, True, False),
    (["--no-gpu"], {"EXPORTER_NO_GPU": "false"}, False, False),
    (["--no-modelmesh-insecure"], {"EXPORTER_MODELMESH_INSECURE": "true"}, True, False),
    ([], {"EXPORTER_MODELMESH_INSECURE": "true", "EXPORTER_NO_GPU": "yes"}, False, True),
])
def test_an_exporter_switch_given_in_the_args_wins_over_its_variable_either_way(
        argv: list[str], environ: dict[str, str], gpu: bool, insecure: bool) -> None:
    settings = parse_settings(argv, environ)
    assert (settings.gpu_enabled, settings.modelmesh_insecure) == (gpu, insecure)


def test_serve_insecure_dev_set_by_its_variable_is_turned_off_by_the_args() -> None:
    parser = cli.build_parser()
    environ = {"AUTOSCALER_INSECURE_DEV": "true"}
    assert settings_from_args(parser.parse_args(["serve"]), environ).insecure_dev is True
    assert settings_from_args(parser.parse_args(["serve", "--no-insecure-dev"]), environ).insecure_dev is False


def test_the_exporter_started_with_no_gpu_in_its_variable_and_gpu_in_its_args_says_the_collector_is_on(
        tmp_path: Path) -> None:
    """`EXPORTER_NO_GPU=true` from a shared pod template, `--gpu` in one runtime's args: the args win."""
    port, log = free_port(), tmp_path / "exporter.log"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    environ.update(EXPORTER_NO_GPU="true")
    with running(["exporter.cli", "--gpu", "--listen", f"127.0.0.1:{port}", "--modelmesh-url",
                  "http://127.0.0.1:1/metrics"], f"http://127.0.0.1:{port}/healthz", log, env=environ):
        pass
    assert "GPU collector on" in log.read_text() or "GPU collector failing" in log.read_text(), log.read_text()
