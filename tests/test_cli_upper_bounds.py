"""Durations that had no upper bound, refused at start in the one line their neighbours' ranges are said in.

`serve --leader-elect-lease-duration 1e300` (or 3e9) started, and every attempt to create the Lease was refused by
the API server (400: leaseDurationSeconds is an int32), so no replica ever led and no deletion cost was written;
`--scale-down-tau 1e300` (and the policy key `scale_down_tau_s`) served values that never fell; the exporter's
`--model-recency-horizon 1e300` kept every model the pod ever served; `simulate --tick 1e300` and `--tick 1e-300`
stopped with an OverflowError traceback, `--startup-delay`, `--load-time` 1e300 ran a day whose pods never got
Ready or never loaded a model; `--slo-queue-ms 1e300` never delayed a request, `--pod-rps 1e300` reported
"0.00x oracle", `--cache-models` of 400 digits stopped with an OverflowError traceback; `demo --duration 1e300` ran
for ever. Values at the bound still start. The policy
file's durations too: `warmup_grace_s`, `target_lru_age_s` (1e300 stopped `simulate --config` with an OverflowError
traceback), `queue_drain_s` and `target_queue_delay_s` (tests/policies/test_policy_upper_bounds.py: annotations).
Two keys that are no durations, `target_rps_per_pod` and `cache_pressure_cap`, are used as given above the range
any runtime needs, with a WARNING: the releases before took any, and refusing one stopped an upgrade's replicas
(tests/test_upgrade_policy_above_range.py).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler import cli
from autoscaler.policies.policy import PROPOSAL_LIMIT
from tests.support.ports import free_port
from tests.support.processes import TEST_PROCESS_ENV, running, start, stop, wait_until_logged
from tests.test_serve_leader_flags import KUBECONFIG

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, **TEST_PROCESS_ENV, "PYTHONPATH": str(REPO)}

TARGETS = """runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods:
      - {name: demo-0, url: "http://127.0.0.1:1/metrics"}
"""

def command(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autoscaler.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**ENV, **(env or {})})


SERVE_REFUSED = [
    # Taken: the Lease's leaseDurationSeconds, an int32, was refused (400) at every attempt, and no replica led.
    ("--leader-elect-lease-duration", "1e300", "must be 0.1 to 3600 seconds"),
    ("--leader-elect-lease-duration", "3e9", "must be 0.1 to 3600 seconds"),
    ("--leader-elect-lease-duration", "0", "must be 0.1 to 3600 seconds"),
    ("--leader-elect-renew-deadline", "1e300", "must be 0.1 to 3600 seconds"),
    ("--leader-elect-retry-period", "1e300", "must be 0.1 to 3600 seconds"),
    ("--leader-elect-retry-period", "2h", "must be 0.1 to 3600 seconds"),
    # Taken: the served values never fell.
    ("--scale-down-tau", "1e300", "must be 0 to 86400 seconds"),
    ("--scale-down-tau", "86401", "must be 0 to 86400 seconds"),
]


@pytest.mark.parametrize(("flag", "value", "says"), SERVE_REFUSED, ids=[f"{f}={v}" for f, v, _ in SERVE_REFUSED])
def test_serve_refuses_a_duration_past_its_bound_in_one_line_naming_flag_value_and_range(
        flag: str, value: str, says: str, tmp_path: Path) -> None:
    done = command("serve", "--insecure-dev", flag, value, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line == f"modelmesh-autoscaler serve: error: argument {flag}: {says}, got {value!r}"


def test_serve_refuses_a_lease_duration_past_its_bound_from_its_variable_too(tmp_path: Path) -> None:
    done = command("serve", "--insecure-dev", cwd=tmp_path, env={"AUTOSCALER_LEADER_ELECT_LEASE_DURATION": "1e300"})
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert "AUTOSCALER_LEADER_ELECT_LEASE_DURATION" in line and "must be 0.1 to 3600 seconds, got '1e300'" in line


def test_serve_starts_with_every_bounded_duration_at_its_bound(tmp_path: Path) -> None:
    """An hour's Lease (renewed within 3599 s, retried every 2999 s: within the rules between them) and a day's
    fall: the adapter serves."""
    (tmp_path / "targets.yaml").write_text(TARGETS)
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    log = tmp_path / "serve.log"
    process = start(["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen",
                     f"127.0.0.1:{free_port()}", "--targets", str(tmp_path / "targets.yaml"), "--kubeconfig",
                     str(tmp_path / "kubeconfig"), "--leader-elect", "true", "--leader-elect-lease-duration", "1h",
                     "--leader-elect-renew-deadline", "3599", "--leader-elect-retry-period", "2999",
                     "--scale-down-tau", "24h"], log, env={"PYTHONPATH": str(REPO)})
    try:
        wait_until_logged(process, log, "serving external.metrics.k8s.io")
    finally:
        stop(process)


def test_a_policy_file_s_scale_down_tau_past_a_day_stops_the_start_naming_key_value_and_range(
        tmp_path: Path) -> None:
    (tmp_path / "targets.yaml").write_text(TARGETS)
    (tmp_path / "policy.yaml").write_text("defaults: {scale_down_tau_s: 1e300}\n")
    done = command("serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{free_port()}", "--targets",
                   str(tmp_path / "targets.yaml"), "--config", str(tmp_path / "policy.yaml"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = [line for line in done.stderr.splitlines() if "cannot start" in line]
    assert "scale_down_tau_s must be 0 to 86400 seconds (0: fall at once), got 1e+300" in line, line


def exporter(*flags: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "exporter.cli", "--no-gpu", "--modelmesh-url",
                           "http://127.0.0.1:1/metrics", *flags], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**ENV, **{k: "" for k in os.environ if k.startswith("EXPORTER_")}})


@pytest.mark.parametrize("value", ["1e300", "604801", "169h"])
def test_the_exporter_refuses_a_model_recency_horizon_past_a_week(value: str, tmp_path: Path) -> None:
    """Taken, every model the pod ever served stayed in the output: what the horizon is there to stop."""
    done = exporter("--model-recency-horizon", value, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.endswith(f"argument --model-recency-horizon: must be 0 to 604800 seconds, got {value!r}"), line


def test_the_exporter_starts_with_a_model_recency_horizon_of_a_week(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "exporter.log"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    with running(["exporter.cli", "--no-gpu", "--listen", f"127.0.0.1:{port}", "--modelmesh-url",
                  "http://127.0.0.1:1/metrics", "--model-recency-horizon", "604800"],
                 f"http://127.0.0.1:{port}/healthz", log, env=environ):
        pass


TINY = ["--synthetic", "--models", "3", "--hours", "0.05", "--rps", "2", "--no-plot", "--quiet", "--advice", "off",
        "--policies", "fixed,skew-aware"]

SIMULATE_REFUSED = [
    # OverflowError tracebacks: a step count no int holds, a window of 1e301 steps.
    ("--tick", "1e300", "must be 0.1 to 600 seconds"),
    ("--tick", "1e-300", "must be 0.1 to 600 seconds"),
    # Ran, with pods that never got Ready, or models that never loaded.
    ("--startup-delay", "1e300", "must be 0.1 to 3600 seconds"),
    ("--load-time", "1e300", "must be 0.1 to 3600 seconds"),
    ("--min-churn-age", "1e300", "must be 0 to 86400 seconds"),
    # Ran: no queue was ever long enough to delay a request; 1e-300, every request that queued at all was delayed.
    ("--slo-queue-ms", "1e300", "must be 1 to 600000 ms"),
    ("--slo-queue-ms", "1e-300", "must be 1 to 600000 ms"),
    ("--slo-queue-ms", "0", "must be 1 to 600000 ms"),
    ("--slo-queue-ms", "nan", "must be a finite number"),
    # Ran, on "1e+300 req/s per pod" at 0.00x the oracle; 1e-300 was refused with a pod count of 300 digits.
    ("--pod-rps", "1e300", "must be 0.001 to 100000 req/s"),
    ("--pod-rps", "1e-300", "must be 0.001 to 100000 req/s"),
    ("--pod-rps", "-1", "must be 0.001 to 100000 req/s"),
    ("--pod-rps", "inf", "must be a finite number"),
    # Ran on "1000000000000000000000 model copies per pod"; with 400 digits, an OverflowError traceback.
    ("--cache-models", "1000000000000000000000", "must be 1 to 1000000"),
    ("--cache-models", "1" + "0" * 400, "must be 1 to 1000000"),
    ("--cache-models", "0", "must be 1 to 1000000"),
]


@pytest.mark.parametrize(("flag", "value", "says"), SIMULATE_REFUSED,
                         ids=[f"{f}={v}" for f, v, _ in SIMULATE_REFUSED])
def test_simulate_refuses_a_cluster_duration_past_its_bound(flag: str, value: str, says: str, tmp_path: Path) -> None:
    done = command("simulate", *TINY, "--out", str(tmp_path / "out"), flag, value, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"modelmesh-autoscaler simulate: error: argument {flag}: {says}, got {value!r}"


@pytest.mark.parametrize("flags", [
    ["--tick", "600", "--startup-delay", "3600", "--load-time", "3600", "--min-churn-age", "86400",
     "--slo-queue-ms", "600000", "--pod-rps", "100000", "--cache-models", "1000000"],
    # fixed runs the peak's need whatever --max-replicas says: at 0.001 req/s a pod, TINY's 2 req/s made it 2,084
    # pods for 1,800 ticks (7 CPU-s); a twentieth of a request a second (4 requests) makes it 63.
    ["--tick", "0.1", "--startup-delay", "0.1", "--load-time", "0.1", "--min-churn-age", "0",
     "--slo-queue-ms", "1", "--pod-rps", "0.001", "--cache-models", "1", "--max-replicas", "3", "--rps", "0.05"],
], ids=["highest", "lowest"])
def test_simulate_runs_with_its_cluster_flags_at_their_bounds(flags: list[str], tmp_path: Path) -> None:
    done = command("simulate", *TINY, "--out", str(tmp_path / "out"), *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "report.json").exists()


@pytest.mark.parametrize(("flag", "value"), [("--duration", "1e300"), ("--duration", "25h"),
                                             ("--start-timeout", "1e300"), ("--start-timeout", "3601")])
def test_demo_refuses_a_duration_past_its_bound(flag: str, value: str, tmp_path: Path) -> None:
    """Taken, `--duration 1e300` ran until Ctrl-C; `--start-timeout 1e300` waited for ever on a pod that never
    started."""
    done = command("demo", flag, value, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    bounds = "1 to 86400" if flag == "--duration" else "1 to 3600"
    assert line == f"modelmesh-autoscaler demo: error: argument {flag}: must be {bounds} seconds, got {value!r}"


def test_demo_takes_its_durations_at_their_bounds() -> None:
    args = cli.build_parser().parse_args(["demo", "--duration", "86400", "--start-timeout", "3600"])
    assert (args.duration, args.start_timeout) == (86400.0, 3600.0)


def test_simulate_never_advises_a_scale_down_tau_the_adapter_refuses() -> None:
    """From a day's time constant, "raise it" doubled it to two days, a policy file the adapter refuses at start:
    the step stops at the bound, and at the bound nothing is advised (a step that stays put is none)."""
    from autoscaler.policies.policy import RuntimePolicy
    from autoscaler.policies.policy_values import SCALE_DOWN_TAU_RANGE_S, check_policy
    from autoscaler.simulation.advice import LEVERS, RAISE

    [lever] = [lever for lever in LEVERS if lever.setting == "scale_down_tau_s" and lever.direction == RAISE]
    highest = SCALE_DOWN_TAU_RANGE_S[1]
    assert lever.step(60_000.0) == highest
    check_policy(RuntimePolicy(scale_down_tau_s=lever.step(60_000.0)))
    assert lever.step(highest) == highest


POLICY_REFUSED = [
    # Taken: the warm-up log line printed a 301-digit number of seconds, and the runtime warmed up for ever.
    ("warmup_grace_s", "warmup_grace_s must be 0 to 10800 seconds or null, got 1e+300"),
    # Taken: `simulate --config` stopped with an OverflowError traceback; serving, the cache term held for good.
    ("target_lru_age_s", "target_lru_age_s must be > 0 and at most 604800 seconds, got 1e+300"),
    ("queue_drain_s", "queue_drain_s must be > 0 and at most 3600 seconds, got 1e+300"),
    ("target_queue_delay_s", "target_queue_delay_s must be > 0 and at most 600 seconds, got 1e+300"),
]


@pytest.mark.parametrize(("key", "says"), POLICY_REFUSED, ids=[key for key, _ in POLICY_REFUSED])
def test_a_policy_file_s_duration_past_its_bound_stops_serve_and_simulate_in_one_line(
        key: str, says: str, tmp_path: Path) -> None:
    (tmp_path / "targets.yaml").write_text(TARGETS)
    (tmp_path / "policy.yaml").write_text(f"defaults: {{{key}: 1e300}}\n")
    served = command("serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{free_port()}",
                     "--targets", str(tmp_path / "targets.yaml"), "--config", str(tmp_path / "policy.yaml"),
                     cwd=tmp_path)
    assert served.returncode == 2, served.stderr
    [line] = [line for line in served.stderr.splitlines() if "cannot start" in line]
    assert says in line, line
    simulated = command("simulate", *TINY, "--out", str(tmp_path / "out"), "--config", str(tmp_path / "policy.yaml"),
                        cwd=tmp_path)
    assert simulated.returncode == 2, simulated.stderr
    assert "Traceback" not in simulated.stderr
    [line] = simulated.stderr.splitlines()
    assert says in line, line


def test_simulate_runs_with_a_policy_file_at_every_bound(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text("defaults: {warmup_grace_s: 10800, target_lru_age_s: 604800, "
                                          "queue_drain_s: 3600, target_queue_delay_s: 600, need_weight_cache: 1000, "
                                          "target_rps_per_pod: 1e6, cache_pressure_cap: 10}\n")
    done = command("simulate", *TINY, "--out", str(tmp_path / "out"), "--config", str(tmp_path / "policy.yaml"),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "report.json").exists()


def test_simulate_runs_with_a_policy_file_above_the_range_and_says_so(tmp_path: Path) -> None:
    """The values an older release's file held (the reviewer's 12 and 2,000,000) run, said on stderr."""
    (tmp_path / "policy.yaml").write_text("defaults: {target_rps_per_pod: 2000000, cache_pressure_cap: 12}\n")
    done = command("simulate", *TINY, "--out", str(tmp_path / "out"), "--config", str(tmp_path / "policy.yaml"),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for said in ("cache_pressure_cap 12: above the range any runtime needs, used as given",
                 "target_rps_per_pod 2000000: above the range any runtime needs, used as given"):
        assert said in done.stderr, done.stderr


def test_simulate_never_advises_a_target_lru_age_the_adapter_refuses() -> None:
    """"Raise it" multiplied target_lru_age_s by 6: from 2 days, 12, past the week the key takes (the exporters'
    longest --model-recency-horizon). The step stops at the bound, and at the bound nothing is advised."""
    from autoscaler.policies.policy import RuntimePolicy
    from autoscaler.policies.policy_values import TARGET_LRU_AGE_RANGE_S, check_policy
    from autoscaler.simulation.advice import LEVERS, RAISE

    [lever] = [lever for lever in LEVERS if lever.setting == "target_lru_age_s" and lever.direction == RAISE]
    highest = TARGET_LRU_AGE_RANGE_S[1]
    assert lever.step(172_800.0) == highest
    check_policy(RuntimePolicy(target_lru_age_s=lever.step(172_800.0)))
    assert lever.step(highest) == highest
    assert lever.step(600.0) == 3600.0


def test_simulate_never_advises_a_min_replicas_above_the_policy_files_max_replicas(tmp_path: Path) -> None:
    """With `max_replicas: 4` in the policy file, "raise min_replicas 3 -> 6" was advised, and its compare command
    stopped at once: "defaults: max_replicas must be null or >= min_replicas ..., got 4; min_replicas is 6". The
    step stops at the policy's own max."""
    from autoscaler.policies.config_file import load_policy_book
    from autoscaler.simulation.synthetic_trace import synthetic
    from autoscaler.simulation.trace_write import write_csv

    # its first 6 hours, the daily cycle's night: quiet, delays missed
    write_csv(synthetic(models=200, hours=6.0, mean_rps=40.0), tmp_path / "day.csv")
    (tmp_path / "policy.yaml").write_text("defaults:\n  min_replicas: 3\n  max_replicas: 4\n")
    done = command("simulate", "--trace", str(tmp_path / "day.csv"), "--out", str(tmp_path / "out"), "--no-plot",
                   "--quiet", "--advice", "off", "--config", str(tmp_path / "policy.yaml"), "--max-replicas", "10",
                   cwd=tmp_path)  # (a day's peak sized 10: doubled, the floor went past the policy's 4 to 6)
    assert done.returncode == 0, done.stderr
    advice = done.stdout.split("What to change", 1)[1].split("\n\n", 1)[0]
    assert "raise min_replicas 3 -> 4" in advice, advice
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    [advised] = [s for e in report["advice"] for s in e["settings"] if s["setting"] == "min_replicas"]
    write = advised["command"].split(" && ")[0]
    subprocess.run(["bash", "-c", write], cwd=tmp_path, check=True)
    book = load_policy_book(Path(shlex.split(write)[-1]), announce=False)
    assert (book.defaults.min_replicas, book.defaults.max_replicas) == (4, 4)


@settings(max_examples=200, deadline=None)
@given(floor=st.integers(1, PROPOSAL_LIMIT), policy_max=st.none() | st.integers(1, PROPOSAL_LIMIT),
       hpa_max=st.integers(1, 3 * PROPOSAL_LIMIT), queue_drain_s=st.floats(0.001, 3600.0),
       scale_down_tau_s=st.floats(0.0, 86_400.0), target_lru_age_s=st.floats(0.001, 604_800.0))
def test_every_setting_advised_moves_its_way_within_what_the_adapter_takes(
        floor: int, policy_max: int | None, hpa_max: int, queue_drain_s: float, scale_down_tau_s: float,
        target_lru_age_s: float) -> None:
    """"lower X a -> b" with b below a, "raise" above, and a policy file the adapter takes: never a min_replicas
    past the policy's max_replicas, the HPA's maxReplicas or the 1,000,000 the adapter serves, nor a queue_drain_s
    lowered from under the HPA's 15 s sync to 15 (a raise, said as "lower")."""
    from dataclasses import replace

    from autoscaler.policies.policy import RuntimePolicy
    from autoscaler.policies.policy_values import check_policy
    from autoscaler.simulation.advice import advice
    from autoscaler.simulation.rerun import Rerun

    policy_max = None if policy_max is None else max(policy_max, floor)
    policy = RuntimePolicy(min_replicas=floor, max_replicas=policy_max, queue_drain_s=queue_drain_s,
                           scale_down_tau_s=scale_down_tau_s, target_lru_age_s=target_lru_age_s)
    rerun = Rerun((), "/tmp/out", "/tmp/policy.yaml", None, 1, hpa_max, policy, None)
    missed = {"met": False}
    report = {"cluster": {"queue_timed": True}, "policies": {"skew-aware": {
        "least_replicas": floor, "goal": {"parts": {"pod_hours": missed, "delayed": missed,
                                                    "avoidable_cold_loads": missed}}}}}
    for entry in advice(report, rerun):
        for setting in entry["settings"]:
            if setting["in"] != "--config defaults:":
                continue
            now, tried = setting["now"], setting["try"]
            assert (tried > now) if setting["direction"] == "raise" else (tried < now), setting
            check_policy(replace(policy, **{setting["setting"]: tried}))
            if setting["setting"] == "min_replicas":
                assert tried <= hpa_max, setting
