"""The advice's compare command is this run's command with one setting changed, whatever the run was given: the
policy file its `printf` writes loads as this run's policy with only that key changed (a user's other keys kept,
every digit of a value kept), and its flags parse back to this run's but for those the advice sets, the trace's
path made absolute (pasted in another folder, a relative one failed)."""

from __future__ import annotations

import argparse
import shlex
import subprocess
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.policies.config_file import load_policy_book
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.simulation.advice import LEVERS, MIN_REPLICAS
from autoscaler.simulation.hpa_spec import DEFAULT_BEHAVIOR, Behavior, ScalingPolicy, ScalingRules
from autoscaler.simulation.hpa_windows import DOWN_WINDOW, WINDOWS
from autoscaler.simulation.rerun import COMPARED, SET_HERE, Rerun, given_flags
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR
from autoscaler.simulation.simulate_args import add_simulate_arguments
from autoscaler.simulation.simulate_hpa_file import read_hpa_file
from exporter.env_flags import FLAG_VALUES

CONFIG_KEYS = sorted(({lever.setting for lever in LEVERS} & {f.name for f in fields(RuntimePolicy)}) - {MIN_REPLICAS})
"""The keys a lever steps from their value (min_replicas, None unless set, from the HPA's: the test below)."""

ratios = st.floats(min_value=0.01, max_value=1.0, allow_nan=False)
durations = st.floats(min_value=0.001, max_value=360.0, allow_nan=False)
"""Up to a tenth of `queue_drain_s`'s bound (`QUEUE_DRAIN_RANGE_S`), as each key's below: the test multiplies the
value by up to 10, and a value past the bound is a policy file the adapter refuses."""
policies = st.builds(RuntimePolicy, target_gpu_busy=ratios, cache_full_ratio=ratios, queue_drain_s=durations,
                     target_lru_age_s=st.floats(min_value=0.001, max_value=60_480.0, allow_nan=False),
                     scale_down_tau_s=st.floats(min_value=0.0, max_value=8_640.0),
                     skew_order=st.sampled_from([1.0, 2.0, 3.5]))
paths = st.text(st.characters(codec="utf-8", exclude_characters="\x00\r\n"), min_size=1, max_size=20).filter(
    lambda text: not text.startswith("-") and text.strip() == text)


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(add_help=False)
    add_simulate_arguments(made)
    return made


@st.composite
def argv(draw: st.DrawFn) -> list[str]:
    """A `simulate` command line: a trace file or a synthetic trace, and some cluster flags."""
    shape = draw(st.sampled_from(["steady", "churn"]))
    words = (["--trace", draw(paths)] if draw(st.booleans()) else
             ["--synthetic", "--models", str(draw(st.integers(1, 900))), "--shape", shape])
    words += ["--out", draw(paths)]
    for flag, values in (("--pod-rps", st.floats(0.01, 1e4)), ("--cache-models", st.integers(1, 500)),
                         ("--load-time", st.floats(0.5, 600.0)), ("--tick", st.sampled_from([1.0, 2.5, 5.0]))):
        if draw(st.booleans()):
            words += [flag, repr(draw(values))]
    if draw(st.booleans()):
        words.append(draw(st.sampled_from(["--queue-untimed", "--no-plot", "--quiet", "--plot"])))
    return words


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=argv(), policy=policies, key=st.sampled_from(CONFIG_KEYS), factor=st.floats(0.1, 10.0))
def test_the_compare_command_is_this_run_with_only_the_advised_setting_changed(
        tmp_path: Path, words: list[str], policy: RuntimePolicy, key: str, factor: float) -> None:
    args = parser().parse_args(words)
    value = min(1.0, getattr(policy, key) * factor) if key in ("target_gpu_busy", "cache_full_ratio") else (
        getattr(policy, key) * factor)
    rerun = Rerun(given_flags(args, parser()), "out dir", "their policy.yaml", None, 2, 9, policy, SHIPPED_BEHAVIOR)
    command = rerun.command(key, value)
    write, run = command.split(" && ")
    subprocess.run(["bash", "-c", write], cwd=tmp_path, check=True)
    again = parser().parse_args(shlex.split(run)[2:])
    assert load_policy_book(tmp_path / again.config, announce=False).defaults == replace(policy, **{key: value})
    assert_same_run(args, again)
    assert (again.policies, again.min_replicas, again.max_replicas) == (tuple(COMPARED.split(",")), 2, 9)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=argv(), policy=policies)
def test_the_min_replicas_command_raises_skew_awares_floor_alone_and_the_hpa_command_changes_one_window(
        tmp_path: Path, words: list[str], policy: RuntimePolicy) -> None:
    """Advised as `--min-replicas 4`, the compare run raised mean-hpa's floor too, and its ratio read 0.954x where
    skew-aware's delays fell 6x: the floor is now the policy file's, the HPA's minReplicas (mean-hpa's) as run. The
    scale-down window's command dropped --hpa-behavior, the user's scale-up window with it: it now writes their
    behavior (here none: the API server's defaults for the rest) with that window alone changed."""
    args = parser().parse_args(words)
    rerun = Rerun(given_flags(args, parser()), "out", "their policy.yaml", "their hpa.yaml", 2, 9, policy, None)
    write, run = rerun.command(MIN_REPLICAS, 4).split(" && ")
    subprocess.run(["bash", "-c", write], cwd=tmp_path, check=True)
    more = parser().parse_args(shlex.split(run)[2:])
    assert (more.hpa_behavior, more.min_replicas) == (Path("their hpa.yaml"), 2)
    assert load_policy_book(tmp_path / more.config, announce=False).defaults == replace(policy, min_replicas=4)
    assert_same_run(args, more)
    write, run = rerun.command(DOWN_WINDOW, 0).split(" && ")
    subprocess.run(["bash", "-c", write], cwd=tmp_path, check=True)
    window = parser().parse_args(shlex.split(run)[2:])
    assert window.config == Path("their policy.yaml")
    assert read_hpa_file(tmp_path / window.hpa_behavior)[0] == replace(
        DEFAULT_BEHAVIOR, scale_down=replace(DEFAULT_BEHAVIOR.scale_down, stabilization_window_s=0))
    assert_same_run(args, window)


rules = st.builds(ScalingRules, st.integers(0, 3600), st.sampled_from(["Max", "Min", "Disabled"]),
                  st.lists(st.builds(ScalingPolicy, st.sampled_from(["Pods", "Percent"]), st.integers(1, 1000),
                                     st.integers(1, 1800)), min_size=1, max_size=3).map(lambda p: tuple(sorted(p))),
                  st.none() | st.floats(0.0, 2.0) | st.sampled_from([0.05, 0.1, 1e-05]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(behavior=st.builds(Behavior, rules, rules), setting=st.sampled_from(WINDOWS), seconds=st.integers(0, 3600))
def test_the_hpa_window_command_writes_the_users_behavior_with_that_window_alone_changed(
        tmp_path: Path, behavior: Behavior, setting: str, seconds: int) -> None:
    """A reviewer's 600 s scale-up window went with the scale-down window the advice named: every other field of
    their behavior, tolerances to the digit, is read back from the file the command writes as it was."""
    rerun = Rerun(("--synthetic",), "out", None, "their hpa.yaml", 1, 9, RuntimePolicy(), behavior)
    write, run = rerun.command(setting, seconds).split(" && ")
    subprocess.run(["bash", "-c", write], cwd=tmp_path, check=True)
    again = parser().parse_args(shlex.split(run)[2:])
    read = read_hpa_file(tmp_path / again.hpa_behavior)[0]
    direction = "scale_down" if setting == DOWN_WINDOW else "scale_up"
    changed = replace(getattr(behavior, direction), stabilization_window_s=seconds)
    assert read == replace(behavior, **{direction: changed})


def assert_same_run(args: argparse.Namespace, again: argparse.Namespace) -> None:
    """Every flag but those the advice sets as this run had it."""
    def kept(namespace: argparse.Namespace) -> dict[str, Any]:
        # FLAG_VALUES: each value as given, the parse's own record (a flag given twice), not a setting of the run
        return {dest: value for dest, value in vars(namespace).items() if dest not in {*SET_HERE, FLAG_VALUES}}
    given = kept(args)
    if given["trace"] is not None and str(given["trace"]) != "-":
        given["trace"] = given["trace"].absolute()
    assert kept(again) == given
