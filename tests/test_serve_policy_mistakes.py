"""`modelmesh-autoscaler serve --config` with the mistakes people make in a policy file: one line, exit
status 2, naming the key, the value and the fix (docs/configuration.md, Policy)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.processes import http_get, poll, running

TARGETS = """
runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods: [{name: demo-0, url: "http://127.0.0.1:9/metrics"}]
"""


def serve_with(tmp_path: Path, config: Path) -> tuple[int, list[str]]:
    """Run the adapter as a user does; its exit status and its log lines."""
    targets = tmp_path / "targets.yaml"
    targets.write_text(TARGETS)
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--workers", "0",
         "--listen", f"127.0.0.1:{free_port()}", "--targets", str(targets), "--config", str(config)],
        capture_output=True, text=True, timeout=60,
    )
    return done.returncode, [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('defaults: {target_gpu_busy: "80%"}', ["target_gpu_busy", "'80%'", "write 0.8 "]),
        ("defaults: {target_gpu_busy: 80}", ["target_gpu_busy", "80", "write 0.8 for 80%"]),
        ("defaults: {target_queue_delay_s: 50ms}", ["target_queue_delay_s", "'50ms'", "write 0.05 "]),
        ("runtimes: [{namespace: a, deployment: b, scale_down_tau_s: 5m}]",
         ["runtimes[0] (a/b)", "scale_down_tau_s", "'5m'", "write 300 "]),
        ("target_rps_per_pod: 120", ["'target_rps_per_pod'", "under 'defaults:'"]),
        ("defaults: {namespace: a, deployment: b, max_replicas: 3}",
         ["defaults", "'namespace'", "'runtimes:' entry"]),
        # Said "deployment must be a non-empty string, got None", never naming the key written.
        ("runtimes:\n  - {namespace: a, deploymnet: b, max_replicas: 3}\n",
         ["runtimes[0]: unknown key 'deploymnet' (did you mean 'deployment'?)"]),
        ("runtimes:\n  - {namespace: a, deployment: b, max_replicsa: 3}\n",
         ["runtimes[0] (a/b): unknown key 'max_replicsa' (did you mean 'max_replicas'?)"]),
    ],
    ids=["percent_ratio", "ratio_as_percent", "milliseconds", "minutes_in_a_runtime", "key_at_top_level",
         "runtime_under_defaults", "misspelt_deployment", "misspelt_key_in_a_runtime"],
)
def test_a_policy_file_mistake_is_one_line_naming_key_value_and_fix(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    config = tmp_path / "policy.yaml"
    config.write_text(text)
    status, lines = serve_with(tmp_path, config)
    assert status == 2
    [line] = lines
    assert "cannot start" in line and str(config) in line
    for part in expected:
        assert part in line


def test_a_configmap_mounted_as_a_directory_names_the_file_to_give(tmp_path: Path) -> None:
    mounted = tmp_path / "etc-modelmesh-autoscaler"  # a ConfigMap volume: one file per key, plus ..data links
    (mounted / "..2026_12_02").mkdir(parents=True)
    (mounted / "..2026_12_02" / "policy.yaml").write_text("defaults: {}\n")
    (mounted / "..data").symlink_to("..2026_12_02")
    (mounted / "policy.yaml").symlink_to("..data/policy.yaml")
    status, [line] = serve_with(tmp_path, mounted)
    assert status == 2
    assert "is a directory" in line and f"--config {mounted / 'policy.yaml'}" in line


def test_debug_shows_each_policy_value_and_where_it_came_from(tmp_path: Path) -> None:
    """`/debug/runtimes/{ns}/{deployment}` is where docs/configuration.md sends a user to see "the values a runtime is
    decided with": built-in, flag, policy file or annotation, per key."""
    targets = tmp_path / "targets.yaml"
    targets.write_text(TARGETS.replace(
        "    pods:", "    annotations: {autoscaler.modelmesh.io/max-replicas: '8'}\n    pods:"))
    config = tmp_path / "policy.yaml"
    config.write_text("defaults: {target_gpu_busy: 0.7}\n"
                      "runtimes: [{namespace: default, deployment: modelmesh-serving-demo, target_rps_per_pod: 50}]\n")
    listen = free_port()
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "1", "--listen", f"127.0.0.1:{listen}",
            "--targets", str(targets), "--config", str(config), "--skew-order", "3"]
    url = f"https://127.0.0.1:{listen}/debug/runtimes/default/modelmesh-serving-demo"
    env = {"AUTOSCALER_SCALE_DOWN_TAU": "120", "AUTOSCALER_REFRESH_INTERVAL": "5"}
    with running(args, url, tmp_path / "adapter.log", env=env):
        status, body = poll(lambda: answer if (answer := http_get(url))[0] != 503 else None, timeout=30)
    assert status == 200, body
    policy = json.loads(body)["policy"]
    assert policy["skew_order"] == {"value": 3.0, "from": "flag --skew-order"}
    assert policy["scale_down_tau_s"] == {"value": 120.0, "from": "variable AUTOSCALER_SCALE_DOWN_TAU"}
    assert policy["max_staleness_s"]["value"] == 15.0  # no --max-staleness: 3 x the refresh interval
    assert "--max-staleness" not in policy["max_staleness_s"]["from"], policy["max_staleness_s"]
    assert "3 x --refresh-interval" in policy["max_staleness_s"]["from"], policy["max_staleness_s"]
    assert policy["target_gpu_busy"] == {"value": 0.7, "from": f"{config}: defaults"}
    assert policy["target_rps_per_pod"] == {"value": 50.0, "from": f"{config}: runtimes[0]"}
    assert policy["max_replicas"] == {"value": 8, "from": "annotation autoscaler.modelmesh.io/max-replicas"}
    assert policy["queue_drain_s"] == {"value": 60.0, "from": "built-in"}


@pytest.mark.parametrize(
    ("text", "expected", "not_expected"),
    [
        ("defaults: {max_replicas: -1}", "min_replicas is null", "None"),
        ("defaults: {min_coverage: 1.5}", "min_coverage must be in (0, 1], got 1.5", "0.015"),
        ("defaults: {cache_full_ratio: 1.2}", "cache_full_ratio must be in (0, 1], got 1.2", "0.012"),
        # accepted, and served as 1,000,000 without a word
        ("defaults: {min_replicas: 100000000000000000000000}",
         "min_replicas must be null or from 1 to 1,000,000 (the most the adapter serves), got "
         "100000000000000000000000", "Traceback"),
    ],
    ids=["null_spelt_null", "ratio_slightly_over_one", "ratio_over_one", "floor_beyond_what_is_served"],
)
def test_a_policy_value_out_of_range_is_said_as_written_in_the_docs(
    tmp_path: Path, text: str, expected: str, not_expected: str
) -> None:
    """`min_replicas is None` (Python's word for the docs' `null`); 1.5 "fixed" to 0.015, which nobody meant."""
    config = tmp_path / "policy.yaml"
    config.write_text(text)
    status, [line] = serve_with(tmp_path, config)
    assert status == 2
    assert expected in line and not_expected not in line, line


def test_debug_names_the_policy_file_where_it_sets_a_flags_key_back_to_the_built_in_value(tmp_path: Path) -> None:
    """`--min-coverage 0.9` with a file restating `min_coverage: 0.5` (the built-in value) served 0.5 and /debug
    said `built-in`: nothing showed that the file, not the flag, decided it."""
    targets = tmp_path / "targets.yaml"
    targets.write_text(TARGETS)
    config = tmp_path / "policy.yaml"
    config.write_text("defaults: {min_coverage: 0.5, target_gpu_busy: 0.8}\n")
    listen = free_port()
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{listen}",
            "--targets", str(targets), "--config", str(config), "--min-coverage", "0.9"]
    url = f"https://127.0.0.1:{listen}/debug/runtimes/default/modelmesh-serving-demo"
    with running(args, url, tmp_path / "adapter.log"):
        status, body = poll(lambda: answer if (answer := http_get(url))[0] != 503 else None, timeout=30)
    assert status == 200, body
    policy = json.loads(body)["policy"]
    assert policy["min_coverage"] == {"value": 0.5, "from": f"{config}: defaults"}
    assert policy["target_gpu_busy"] == {"value": 0.8, "from": "built-in"}  # no layer below says otherwise
