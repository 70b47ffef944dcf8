"""Policy keys that had no upper bound, refused as every other out-of-range value is: in the policy file (defaults
and a runtime's entry) at start, in one line naming the key, the value and the range; in an annotation by a warning,
the runtime keeping the value it had, every other runtime served as before.

Taken before: `warmup_grace_s: 1e300` printed a 301-digit number of seconds in the warm-up log line, and warmed up
for ever; `target_lru_age_s: 1e300` stopped `simulate --config` with an OverflowError traceback (and past the
exporters' longest `--model-recency-horizon`, a week, the adapter held the cache term for good); `queue_drain_s` and
`target_queue_delay_s` 1e300 turned the queue term off without a word; need weights of 1e308 overflowed their sum
to infinity and every pod's need read 0, so every deletion cost was 0.
`skew_order` has none: past an order of about a thousand the power mean is the hottest pod's value, as meant.

`target_rps_per_pod` and `cache_pressure_cap` have a range any runtime needs (at most 1,000,000 and 10), but a
value above it is used as given, with a WARNING saying what it does: the releases before took any (a runtime
annotated `cache-pressure-cap=20` served 40 pods; refused after the upgrade, it served 6 with every cache full, and
the same value in the policy file stopped every new replica). 1e300 asked for one pod whatever the load, or took
the cache term's cap away, with nothing said: now it is said, at start and in /debug.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.policies.config import ConfigError, PolicyBook
from autoscaler.policies.config_file import load_policy_book
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_values import (
    CACHE_PRESSURE_CAP_RANGE,
    NEED_WEIGHT_RANGE,
    QUEUE_DRAIN_RANGE_S,
    TARGET_LRU_AGE_RANGE_S,
    TARGET_QUEUE_DELAY_RANGE_S,
    TARGET_RPS_PER_POD_RANGE,
    WARMUP_GRACE_RANGE_S,
    above_range,
    check_policy,
    number_as_read,
)
from autoscaler.policies.ranking import default_terms, pod_needs
from tests.policies.builders import NOW, pod

TRITON = RuntimeKey("default", "modelmesh-serving-triton")
OTHER = RuntimeKey("default", "modelmesh-serving-mlserver")
PREFIX = "autoscaler.modelmesh.io/"
LOGGER = "autoscaler.policies.config"

BOUNDED = [
    ("warmup_grace_s", WARMUP_GRACE_RANGE_S[1], "must be 0 to 10800 seconds or null"),
    ("target_lru_age_s", TARGET_LRU_AGE_RANGE_S[1], "must be > 0 and at most 604800 seconds"),
    ("queue_drain_s", QUEUE_DRAIN_RANGE_S[1], "must be > 0 and at most 3600 seconds"),
    ("target_queue_delay_s", TARGET_QUEUE_DELAY_RANGE_S[1], "must be > 0 and at most 600 seconds"),
    ("need_weight_requests", NEED_WEIGHT_RANGE[1], "must be 0 to 1000"),
    ("need_weight_gpu", NEED_WEIGHT_RANGE[1], "must be 0 to 1000"),
    ("need_weight_cache", NEED_WEIGHT_RANGE[1], "must be 0 to 1000"),
    ("need_weight_unique", NEED_WEIGHT_RANGE[1], "must be 0 to 1000"),
]
ABOVE_RANGE = [("target_rps_per_pod", TARGET_RPS_PER_POD_RANGE[1], "1,000,000"),
               ("cache_pressure_cap", CACHE_PRESSURE_CAP_RANGE[1], "10")]
"""The keys used as given above their range, its top, and the top as the warning says it."""
ABOVE = "above the range any runtime needs, used as given"
IDS = [key for key, _, _ in BOUNDED]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


def test_the_documented_bounds() -> None:
    """The bounds docs/configuration.md states, and why each (the constants' docstrings)."""
    assert WARMUP_GRACE_RANGE_S == (0.0, 10_800.0)
    assert TARGET_LRU_AGE_RANGE_S == (0.0, 604_800.0)
    assert QUEUE_DRAIN_RANGE_S == (0.0, 3600.0)
    assert TARGET_QUEUE_DELAY_RANGE_S == (0.0, 600.0)
    assert NEED_WEIGHT_RANGE == (0.0, 1000.0)
    assert TARGET_RPS_PER_POD_RANGE == (0.0, 1_000_000.0)
    assert CACHE_PRESSURE_CAP_RANGE == (0.0, 10.0)


@pytest.mark.parametrize(("key", "highest", "says"), BOUNDED, ids=IDS)
@pytest.mark.parametrize("where", ["defaults", "runtime"])
def test_a_policy_file_value_past_the_bound_stops_the_start_naming_key_value_and_range(
        key: str, highest: float, says: str, where: str, tmp_path: Path) -> None:
    text = (f"defaults: {{{key}: 1e300}}\n" if where == "defaults" else
            f"runtimes: [{{namespace: default, deployment: modelmesh-serving-triton, {key}: 1e300}}]\n")
    with pytest.raises(ConfigError) as raised:
        load_policy_book(write(tmp_path, text), announce=False)
    assert f"{key} {says}, got 1e+300" in str(raised.value), raised.value


@pytest.mark.parametrize(("key", "highest", "says"), BOUNDED, ids=IDS)
def test_a_value_just_past_the_bound_is_refused_and_the_bound_is_taken(
        key: str, highest: float, says: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{key} {says}")):
        load_policy_book(write(tmp_path, f"defaults: {{{key}: {highest + 1:.15g}}}\n"), announce=False)
    book = load_policy_book(write(tmp_path, f"defaults: {{{key}: {highest:.15g}}}\n"), announce=False)
    assert getattr(book.policy_for(TRITON), key) == highest


@pytest.mark.parametrize(("written", "shown"), [("604801", "604801"), ("604801.0", "604801"),
                                                ("604800.5", "604800.5"), ("1e300", "1e+300")])
def test_a_refused_number_reads_as_written_not_with_a_trailing_point_0(written: str, shown: str,
                                                                        tmp_path: Path) -> None:
    """The file said `target_rps_per_pod: 1000001`, the refusal `got 1000001.0`, beside `got 1e+300` for 1e300:
    a number the user never wrote. A float as read: every digit, without the `.0`."""
    with pytest.raises(ConfigError) as raised:
        load_policy_book(write(tmp_path, f"defaults: {{target_lru_age_s: {written}}}\n"), announce=False)
    assert str(raised.value).endswith(f", got {shown}"), raised.value


def test_every_bound_at_once_is_a_policy_the_adapter_takes() -> None:
    check_policy(RuntimePolicy(**{key: highest for key, highest, _ in BOUNDED}))  # type: ignore[arg-type]


@pytest.mark.parametrize(("key", "highest", "says"), BOUNDED, ids=IDS)
def test_an_annotation_past_the_bound_is_ignored_with_a_warning_and_other_runtimes_are_served(
        key: str, highest: float, says: str, caplog: pytest.LogCaptureFixture) -> None:
    """As any other out-of-range annotation: a mistake on one Deployment must not stop the others."""
    book = PolicyBook()
    annotation = PREFIX + key.replace("_", "-")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        bad = book.policy_for(TRITON, {annotation: "1e300"})
        good = book.policy_for(OTHER, {annotation: f"{highest:g}"})
    assert getattr(bad, key) == getattr(RuntimePolicy(), key)
    assert getattr(good, key) == highest
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"ignoring annotation {annotation}='1e300': {key} {says}" in warning, warning


@pytest.mark.parametrize(("key", "highest", "top"), ABOVE_RANGE, ids=[key for key, _, _ in ABOVE_RANGE])
@pytest.mark.parametrize("where", ["defaults", "runtime"])
def test_a_policy_file_value_above_the_range_is_used_as_given_and_said_at_start(
        key: str, highest: float, top: str, where: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = (f"defaults: {{{key}: 1e300}}\n" if where == "defaults" else
            f"runtimes: [{{namespace: default, deployment: modelmesh-serving-triton, {key}: 1e300}}]\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        book = load_policy_book(write(tmp_path, text))
    assert getattr(book.policy_for(TRITON), key) == 1e300
    [warning] = [r.getMessage() for r in caplog.records]
    place = "defaults" if where == "defaults" else "runtimes[0] (default/modelmesh-serving-triton)"
    assert f"{tmp_path / 'policy.yaml'}: {place}: {key} 1e+300: {ABOVE}" in warning, warning
    assert warning.endswith(f"at most {top} is meant"), warning


@pytest.mark.parametrize(("key", "highest", "top"), ABOVE_RANGE, ids=[key for key, _, _ in ABOVE_RANGE])
def test_the_top_of_the_range_is_said_nowhere_and_just_above_it_is(
        key: str, highest: float, top: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        book = load_policy_book(write(tmp_path, f"defaults: {{{key}: {highest:.15g}}}\n"))
    assert getattr(book.policy_for(TRITON), key) == highest and not caplog.records
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        book = load_policy_book(write(tmp_path, f"defaults: {{{key}: {highest + 1:.15g}}}\n"))
    assert getattr(book.policy_for(TRITON), key) == highest + 1
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"{key} {highest + 1:.15g}: {ABOVE}" in warning, warning


@pytest.mark.parametrize("key", [key for key, _, _ in ABOVE_RANGE])
@pytest.mark.parametrize(("written", "says"), [("0", "must be > 0"), ("-1", "must be > 0"), (".inf", "finite"),
                                               (".nan", "finite")])
def test_zero_negative_and_non_finite_values_stay_refused(key: str, written: str, says: str,
                                                          tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"defaults: {key} (must be finite|{says})"):
        load_policy_book(write(tmp_path, f"defaults: {{{key}: {written}}}\n"), announce=False)


@pytest.mark.parametrize(("key", "highest", "top"), ABOVE_RANGE, ids=[key for key, _, _ in ABOVE_RANGE])
def test_an_annotation_above_the_range_applies_with_a_warning_once_per_value(
        key: str, highest: float, top: str, caplog: pytest.LogCaptureFixture) -> None:
    """Ignored, it gave the runtime the file's value: `cache-pressure-cap=20` served 6 pods where it served 40."""
    book = PolicyBook()
    annotation = PREFIX + key.replace("_", "-")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        seen = [getattr(book.policy_for(TRITON, {annotation: raw, "rollout": str(i)}), key)
                for i, raw in enumerate(["1e300", "1e300", "2e300", f"{highest:g}"])]
    assert seen == [1e300, 1e300, 2e300, highest]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings  # once for 1e300, once for 2e300, none at the top
    assert f"runtime {TRITON}: annotation {annotation}='1e300': {key} 1e+300: {ABOVE}" in warnings[0], warnings
    assert "ignor" not in warnings[0] and warnings[0].endswith(f"at most {top} is meant"), warnings


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from([key for key, _, _ in ABOVE_RANGE]),
       value=st.floats(min_value=1e-300, max_value=1.7e308, allow_nan=False, allow_infinity=False))
def test_every_finite_positive_value_is_used_as_given_warned_above_the_range_alone(key: str, value: float) -> None:
    """The promise of an upgrade: what an older release took (any finite value over 0) is what runs now."""
    check_policy(RuntimePolicy(**{key: value}))  # type: ignore[arg-type]
    highest = dict((k, h) for k, h, _ in ABOVE_RANGE)[key]
    said = above_range(key, value)
    if value <= highest:
        assert said is None, said
    else:
        assert said is not None and said.startswith(f"{key} {number_as_read(value)}: {ABOVE}"), said


def test_an_annotation_past_the_bound_keeps_the_last_good_value(caplog: pytest.LogCaptureFixture) -> None:
    book = PolicyBook()
    annotation = PREFIX + "warmup-grace-s"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        seen = [book.policy_for(TRITON, {annotation: raw}).warmup_grace_s for raw in ("600", "1e300")]
    assert seen == [600.0, 600.0]
    assert "keeps warmup_grace_s 600" in caplog.records[-1].getMessage()


def test_need_weights_at_their_bound_still_rank_the_pods() -> None:
    """1e308 each overflowed the weights' sum to infinity: every need read 0, every deletion cost 0; at the bound
    the busier pod still needs more."""
    weights = {key: NEED_WEIGHT_RANGE[1] for key, _, _ in BOUNDED if key.startswith("need_weight_")}
    policy = RuntimePolicy(**weights)  # type: ignore[arg-type]
    check_policy(policy)
    busy, idle = pod("busy", rps=10.0, gpu=0.9, cache=0.9), pod("idle", rps=1.0, gpu=0.1, cache=0.1)
    needs = pod_needs([busy, idle], default_terms(policy), NOW)
    assert needs[0] is not None and needs[1] is not None and needs[0] > needs[1] > 0.0, needs
