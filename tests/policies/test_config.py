"""Policies from the config file and annotations (DESIGN §6): layering, annotation tolerance, file errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.policies.config import ConfigError, PolicyBook
from autoscaler.policies.config_file import load_policy_book
from autoscaler.policies.policy import RuntimePolicy

TRITON = RuntimeKey("default", "modelmesh-serving-triton")
OTHER = RuntimeKey("default", "modelmesh-serving-mlserver")
PREFIX = "autoscaler.modelmesh.io/"

DESIGN_EXAMPLE = """
defaults:
  skew_order: 2
  target_gpu_busy: 0.8
  target_rps_per_pod: null
  target_queue_delay_s: 0.05
  queue_drain_s: 60
  target_lru_age_s: 600
  cache_full_ratio: 0.9
  cache_pressure_cap: 1.2
  scale_down_tau_s: 300
  min_replicas: null
  max_replicas: null
runtimes:
  - {namespace: default, deployment: modelmesh-serving-triton, target_rps_per_pod: 120}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


def test_the_design_example_loads_with_one_runtime_override(tmp_path: Path) -> None:
    book = load_policy_book(write(tmp_path, DESIGN_EXAMPLE))
    assert book.policy_for(OTHER, {}) == RuntimePolicy()
    assert book.policy_for(TRITON, {}) == RuntimePolicy(target_rps_per_pod=120.0)


def test_layers_apply_from_broadest_to_most_specific(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
defaults: {skew_order: 3, min_replicas: 2}
runtimes:
  - {namespace: default, deployment: modelmesh-serving-triton, min_replicas: 4, max_replicas: 10}
""",
    )
    base = RuntimePolicy(skew_order=1.5, max_staleness_s=30.0)  # e.g. from CLI flags
    book = load_policy_book(path, base=base)
    assert book.policy_for(OTHER) == RuntimePolicy(skew_order=3.0, max_staleness_s=30.0, min_replicas=2)
    policy = book.policy_for(TRITON, {PREFIX + "max-replicas": "6", "app": "ignored"})
    assert policy == RuntimePolicy(skew_order=3.0, max_staleness_s=30.0, min_replicas=4, max_replicas=6)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({PREFIX + "target-rps-per-pod": "120"}, RuntimePolicy(target_rps_per_pod=120.0)),
        ({PREFIX + "skew-order": " 1.5 "}, RuntimePolicy(skew_order=1.5)),
        ({PREFIX + "max-replicas": "12", PREFIX + "min-replicas": "3"}, RuntimePolicy(min_replicas=3, max_replicas=12)),
        ({PREFIX + "target-queue-delay-s": "1e-1"}, RuntimePolicy(target_queue_delay_s=0.1)),
        ({"other.io/target-rps-per-pod": "5"}, RuntimePolicy()),
    ],
    ids=["target_rps", "whitespace_is_trimmed", "min_and_max", "exponent", "foreign_prefix_ignored"],
)
def test_annotations_override_single_fields(annotations: dict[str, str], expected: RuntimePolicy) -> None:
    assert PolicyBook().policy_for(TRITON, annotations) == expected


def test_annotation_null_clears_an_optional_field() -> None:
    book = PolicyBook(defaults=RuntimePolicy(target_rps_per_pod=50.0, max_replicas=9))
    annotations = {PREFIX + "target-rps-per-pod": "null", PREFIX + "max-replicas": ""}
    assert book.policy_for(TRITON, annotations) == RuntimePolicy()


@pytest.mark.parametrize(
    ("annotation", "value", "why"),
    [
        ("target-rps-per-pod", "fast", "must be a number"),
        ("min-replicas", "2.5", "must be a whole number"),
        ("skew-order", "0.5", "skew_order must be >= 1"),
        ("target-gpu-busy", "80", "target_gpu_busy must be in (0, 1]"),
        ("scale-down-tau-s", "nan", "must be finite"),
        ("skew-order", "null", "may not be null"),
        ("min-replicas", "50", "max_replicas must be null or >= min_replicas"),
        ("max-staleness-s", "1e12", "max_staleness_s must be 0.1 to 10800 seconds"),
        # the hint in the annotation's spelling: the file key's ('target_rps_per_pod') is not what to write here
        ("target-rps-per-pdo", "10", f"no such policy annotation (did you mean {PREFIX}target-rps-per-pod?)"),
    ],
    ids=[
        "not_a_number",
        "fraction_for_a_count",
        "order_below_one",
        "percent_not_ratio",
        "nan",
        "null_required",
        "min_above_max",
        "staleness_for_ever",
        "typo",
    ],
)
def test_a_bad_annotation_is_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture, annotation: str, value: str, why: str
) -> None:
    book = PolicyBook(defaults=RuntimePolicy(max_replicas=10))
    annotations = {PREFIX + annotation: value, PREFIX + "target-lru-age-s": "900"}
    with caplog.at_level(logging.WARNING, logger="autoscaler.policies.config"):
        policy = book.policy_for(TRITON, annotations)
    assert policy == RuntimePolicy(max_replicas=10, target_lru_age_s=900.0)  # the good one still applies
    [record] = caplog.records
    assert str(TRITON) in record.getMessage() and PREFIX + annotation in record.getMessage()
    assert why in record.getMessage()


def test_a_bad_annotation_is_warned_about_once_not_every_refresh(caplog: pytest.LogCaptureFixture) -> None:
    book = PolicyBook()
    with caplog.at_level(logging.WARNING, logger="autoscaler.policies.config"):
        for _ in range(5):
            book.policy_for(TRITON, {PREFIX + "skew-order": "high"})
    assert len(caplog.records) == 1


def test_an_empty_file_gives_the_built_in_defaults(tmp_path: Path) -> None:
    assert load_policy_book(write(tmp_path, "")).policy_for(TRITON) == RuntimePolicy()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("defaults: {target_rps: 10}", "defaults: unknown key 'target_rps' (did you mean 'target_rps_per_pod'?)"),
        ("defaults: {skew_order: two}", "defaults: skew_order must be a number, got 'two'"),
        ("defaults: {skew_order: 0.5}", "defaults: skew_order must be >= 1, got 0.5"),
        ("defaults: {cache_full_ratio: 1.5}", "cache_full_ratio must be in (0, 1]"),
        ("defaults: {min_coverage: 0}", "min_coverage must be in (0, 1]"),
        ("defaults: {queue_drain_s: -15}", "queue_drain_s must be > 0 and at most 3600 seconds"),
        # Taken: a pod whose exporter died was counted fresh, with its last values, for ever.
        ("defaults: {max_staleness_s: 1e12}", "max_staleness_s must be 0.1 to 10800 seconds, got 1000000000000"),
        ("defaults: {min_replicas: true}", "min_replicas must be a whole number, got True"),
        ("defaults: {min_replicas: 2.0}", "min_replicas must be a whole number"),
        ("defaults: {min_replicas: 5, max_replicas: 3}", "max_replicas must be null or >= min_replicas"),
        ("defaults: {target_gpu_busy: .inf}", "target_gpu_busy must be finite"),
        ("defaults: [1, 2]", "defaults: expected a mapping of policy keys"),
        ("targets: []", "unknown top-level key 'targets'"),
        ("- 1\n- 2", "expected a mapping with 'defaults' and 'runtimes'"),
        ("runtimes: {namespace: a}", "runtimes: expected a list"),
        ("runtimes: [{deployment: d}]", "runtimes[0]: namespace must be a non-empty string, got None"),
        (
            "runtimes: [{namespace: a, deployment: d, skew: 3}]",
            "runtimes[0] (a/d): unknown key 'skew' (did you mean 'skew_order'?)",
        ),
        (
            "runtimes: [{namespace: a, deployment: d}, {namespace: a, deployment: d}]",
            "runtimes[1]: runtime a/d is listed twice",
        ),
        (
            "defaults: {max_replicas: 4}\nruntimes: [{namespace: a, deployment: d, min_replicas: 6}]",
            "runtimes[0] (a/d): max_replicas must be null or >= min_replicas",
        ),
        ("defaults: {skew_order: [", "not valid YAML"),
        # it only warned that the entry matched no runtime, while --namespaces refuses the same name at start
        ("runtimes: [{namespace: Model_Serving, deployment: d}]",
         "runtimes[0]: namespace 'Model_Serving' cannot exist (a namespace name has lower-case letters"),
    ],
    ids=[
        "unknown_key",
        "not_a_number",
        "order_below_one",
        "ratio_above_one",
        "zero_coverage",
        "negative_time",
        "staleness_for_ever",
        "bool_is_not_a_count",
        "float_is_not_a_count",
        "min_above_max",
        "infinite",
        "defaults_not_a_mapping",
        "unknown_top_level_key",
        "document_not_a_mapping",
        "runtimes_not_a_list",
        "runtime_without_namespace",
        "unknown_key_in_a_runtime",
        "runtime_listed_twice",
        "runtime_breaks_a_default_limit",
        "broken_yaml",
        "namespace_that_cannot_exist",
    ],
)
def test_a_bad_file_raises_naming_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_policy_book(path)
    assert str(raised.value).startswith(f"{path}:")  # `FILE: what`, or `FILE:LINE:COLUMN: ` for YAML
    assert message in str(raised.value)


def test_a_missing_file_raises_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_policy_book(tmp_path / "absent.yaml")


def test_a_bad_policy_from_flags_raises_a_config_error() -> None:
    with pytest.raises(ConfigError, match="policy for defaults: min_coverage must be in"):
        PolicyBook(defaults=RuntimePolicy(min_coverage=2.0))


def test_zero_tau_is_allowed_to_leave_slow_scale_down_to_the_hpa(tmp_path: Path) -> None:
    book = load_policy_book(write(tmp_path, "defaults: {scale_down_tau_s: 0}"))
    assert book.policy_for(TRITON).scale_down_tau_s == 0.0
