"""`modelmesh-autoscaler simulate` as a user runs it: files written, the table printed, the plot opens."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pytest
import yaml

from autoscaler.simulation.timeline_plot import load_steps
from tests.simulation.runs import FAILED
from tests.support.terminal import ctrl_c_after, moment_of_start_up

SIMULATE = [sys.executable, "-m", "autoscaler.cli", "simulate"]
POLICIES = ("fixed", "fixed-max", "mean-hpa", "skew-aware")


def test_a_small_synthetic_run_writes_the_report_the_table_and_the_plot(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--synthetic", "--models", "30", "--hours", "1", "--rps", "60",
                             "--out", str(out), "--seed", "4"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["oracle_pod_hours"] > 0
    assert report["cache_oracle_pod_hours"] >= report["oracle_pod_hours"]
    assert list(report["policies"]) == list(POLICIES)
    for name in POLICIES:
        entry = report["policies"][name]
        for key in ("pod_hours", "overloaded_seconds", "delayed_requests", "delayed_ratio", "cold_loads",
                    "migrated_loads", "janitor_removals", "delayed_waiting_for_loads", "scale_events", "requests",
                    "terms", "load_waits_s"):
            assert key in entry, (name, key)
        assert entry["requests"] == report["trace"]["requests"]
    assert report["policies"]["fixed"]["scale_events"] == 0
    assert report["policies"]["fixed-max"]["scale_events"] == 0
    maximum = report["cluster"]["max_replicas"]
    bound = report["bound"]  # the fewest delays any replica policy gets: maxReplicas throughout the trace
    assert (bound["policy"], bound["replicas"]) == ("fixed-max", maximum)
    assert bound["delayed_requests"] == report["policies"]["fixed-max"]["delayed_requests"]
    assert report["policies"]["skew-aware"]["goal"].keys() == {"pod_hours", "delayed", "avoidable_cold_loads", "met",
                                                                "parts"}
    bound_line = f"Bound: with every pod maxReplicas allows ({maximum}) throughout the trace"
    assert bound_line in result.stdout
    assert bound_line in (out / "report.md").read_text()
    assert sum(report["policies"]["skew-aware"]["terms"].values()) > 0
    assert report["warnings"] == []  # the key a script reads is there when the run took everything as given
    assert "vs_mean-hpa" in report["policies"]["skew-aware"]
    for name in POLICIES:
        assert f"| {name} |" in result.stdout
        assert f"| {name} |" in (out / "report.md").read_text()
    image = matplotlib.image.imread(out / "timeline.png")
    assert image.shape[0] > 400 and image.shape[1] > 400
    assert "100%" in result.stderr  # the progress bar finished for each policy
    # and for each replay of the advice, one for each setting tried (advice.py)
    tried = sum(len(e["settings"]) + len(e["not_moved"]) for e in report["advice"])
    assert result.stderr.count("100%") == 4 + tried


def test_the_load_panel_holds_each_intervals_rate_to_its_end_and_reaches_the_traces_end() -> None:
    """Half an hour at 60 s intervals, 60 requests/s for 10 minutes then 10: the plot drew a line through the
    interval starts, so the fall began at 9 minutes and the axis stopped at 29."""
    hours, rates = load_steps(60.0, [60.0] * 10 + [10.0] * 20)
    drawn = list(zip(hours, rates, strict=True))  # drawn as steps: each rate held from its point to the next
    assert drawn[9] == pytest.approx((9 / 60, 60.0))  # the tenth minute still at 60 ...
    assert drawn[10] == pytest.approx((10 / 60, 10.0))  # ... the fall at 10 minutes
    assert drawn[-1] == pytest.approx((0.5, 10.0))  # the last minute's rate reaches the trace's end


def five_models(tmp_path: Path, per_minute: int) -> Path:
    """A 20-minute trace at 60 s intervals: model-i gets `per_minute * (i + 1)` requests each minute."""
    trace = tmp_path / "trace.csv"
    rows = ["timestamp_s,model,requests"]
    rows += [f"{60 * m},model-{i},{per_minute * (i + 1)}" for m in range(20) for i in range(5)]
    trace.write_text("\n".join(rows) + "\n")
    return trace


def test_a_csv_trace_and_a_policy_subset(tmp_path: Path) -> None:
    trace = five_models(tmp_path, 30)
    out = tmp_path / "out"
    out.mkdir()
    (out / "timeline.png").write_bytes(b"an earlier run's plot")
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(out), "--policies", "mean-hpa,skew-aware",
                             "--no-plot", "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert list(report["policies"]) == ["mean-hpa", "skew-aware"]
    assert "bound" not in report and "Bound:" not in result.stdout
    assert report["trace"]["requests"] == 20 * 30 * (1 + 2 + 3 + 4 + 5)
    assert not (out / "timeline.png").exists()  # an earlier run's plot beside this run's report would be read as its


@pytest.mark.parametrize("packed", [False, True], ids=["csv", "gzip"])
def test_a_trace_piped_into_standard_input_is_read_as_the_file_is(tmp_path: Path, packed: bool) -> None:
    """`--trace -` reads standard input, as `zcat day.csv.gz | ... --trace -` or an export query piped in would
    give it (gzip is told by its first bytes); it said `-: cannot read trace: No such file or directory`."""
    trace = five_models(tmp_path, 30)
    body = trace.read_bytes()
    if packed:
        body = gzip.compress(body)
    runs = {}
    for name, flags, given in (("file", ["--trace", str(trace)], None), ("stdin", ["--trace", "-"], body)):
        out = tmp_path / name
        result = subprocess.run([*SIMULATE, *flags, "--out", str(out), "--policies", "mean-hpa,skew-aware",
                                 "--no-plot", "--quiet"], input=given, capture_output=True, timeout=120)
        assert result.returncode == 0, result.stderr.decode()
        runs[name] = json.loads((out / "report.json").read_text())
    assert runs["stdin"]["trace"]["source"] == "standard input"
    for report in runs.values():  # what differs: the name, and how long each replay took
        del report["trace"]["source"]
        for policy in report["policies"].values():
            del policy["wall_seconds"]
    assert runs["stdin"] == runs["file"]


@pytest.mark.parametrize(("given", "said"), [("-", "--trace -: standard input is a terminal"),
                                             ("/dev/stdin", "--trace /dev/stdin: a terminal")])
def test_a_trace_on_standard_input_that_is_a_terminal_is_refused_not_waited_for(tmp_path: Path, given: str,
                                                                               said: str) -> None:
    """`--trace -` typed with nothing piped in would wait, silent, on the terminal for a CSV to be typed; so did
    `--trace /dev/stdin`, read like `-` since a pipe named by its path is."""
    primary, secondary = os.openpty()
    try:
        result = subprocess.run([*SIMULATE, "--trace", given, "--out", str(tmp_path / "out")], stdin=secondary,
                                capture_output=True, text=True, timeout=60)
    finally:
        os.close(primary)
        os.close(secondary)
    assert result.returncode == 2, result.stderr
    assert f"{said}: pipe a trace into it" in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


def test_a_modelmesh_that_does_not_time_its_queue_is_replayed_with_the_queue_term_dark(tmp_path: Path) -> None:
    """modelmesh-serving's built-in runtimes time no request queue (ModelMesh does only where the model server
    limits each model's concurrency), so the exporter reports a queue delay of 0: `--queue-untimed` replays that.
    On a bursty trace whose bursts the queue term answers when timed, it never decides untimed. (mean-hpa, which
    reads GPU busy alone, was the same run either way until ModelMesh's own rate check went to its flat 2000 rpm
    untimed, 6 December: test_untimed_rate_check.py.)"""
    reports = {}
    for name, flags in (("timed", []), ("untimed", ["--queue-untimed"])):
        out = tmp_path / name
        result = subprocess.run([*SIMULATE, "--synthetic", "--shape", "bursty", "--models", "100", "--hours", "4",
                                 "--rps", "60", "--policies", "mean-hpa,skew-aware", "--no-plot", "--quiet",
                                 "--advice", "off", "--out", str(out), *flags],  # the terms, not the advice
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        reports[name] = json.loads((out / "report.json").read_text())
    timed, untimed = (reports[name]["policies"] for name in ("timed", "untimed"))
    assert timed["skew-aware"]["terms"].get("queue", 0) > 0
    assert untimed["skew-aware"]["terms"].get("queue", 0) == 0
    assert (reports["timed"]["cluster"]["queue_timed"], reports["untimed"]["cluster"]["queue_timed"]) == (True, False)


def test_bad_input_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,model,requests\n0,a,1\n60,a,lots\n")
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(out)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert f"{FAILED}{trace}: line 3: requests must be a number, got 'lots'" in result.stderr
    assert not out.exists()
    behavior = tmp_path / "hpa.yaml"
    behavior.write_text("behavior:\n  scaleDown:\n    selectPolicy: Slowest\n")
    result = subprocess.run([*SIMULATE, "--synthetic", "--hours", "0.1", "--out", str(out), "--hpa-behavior",
                             str(behavior)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "selectPolicy must be Max, Min or Disabled" in result.stderr
    result = subprocess.run([*SIMULATE, "--synthetic", "--out", str(out), "--policies", "fixed,magic"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "unknown policy 'magic'" in result.stderr


@pytest.mark.parametrize(("flags", "message"), [
    # a billion hours of 5 models: numpy's _ArrayMemoryError, a traceback
    (["--models", "5", "--hours", "1e9"], "--hours 1e+09 is more than the synthetic trace makes (8,760, a year)"),
    # a hundred million models: nothing said, for as long as one waited
    (["--models", "100000000", "--hours", "1"],
     "--models 100,000,000 is more than the synthetic trace makes (100,000)"),
    (["--models", "50000", "--hours", "24"],
     "--models 50,000 x --hours 24 is 1,200,000 model-hours, more than the synthetic trace makes (500,000: a day of "
     "20,833 models, a week of 2,976)"),
    # "simulate: lam value too large"
    (["--rps", "1e300"], "--rps 1e+300 is more than the synthetic trace makes (1,000,000 requests/s)"),
    # one over the limit read "1e+06 is more than ... (1,000,000)"
    (["--rps", "1000001"], "--rps 1,000,001 is more than the synthetic trace makes (1,000,000 requests/s)"),
])
def test_a_synthetic_trace_too_large_to_make_is_refused_at_once(tmp_path: Path, flags: list[str],
                                                              message: str) -> None:
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--synthetic", *flags, "--out", str(out), "--quiet"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"{FAILED}{message}: give a smaller one", result.stderr
    assert not out.exists()


@pytest.mark.parametrize(("flags", "named"), [
    (["--models", "50"], "--models"),
    (["--hours", "2", "--rps", "10", "--shape", "steady"], "--hours, --rps, --shape"),
    # the seed draws the synthetic trace only: a replay of a file is the same for every seed
    (["--seed", "3"], "--seed"),
    (["--models", "500"], "--models"),  # the default, given: still a flag that does nothing
])
def test_synthetic_flags_given_with_a_trace_are_refused_naming_them(tmp_path: Path, flags: list[str],
                                                                    named: str) -> None:
    """They were left out without a word: a user who asked for --hours 2 of a day's trace got the whole day."""
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,model,requests\n0,a,60\n60,a,30\n")
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--trace", str(trace), *flags, "--out", str(out), "--quiet"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (f"{FAILED}{named}: only for --synthetic (a --trace replays as it is): leave "
                                     f"{'them' if ',' in named else 'it'} out"), result.stderr
    assert not out.exists()


def test_a_synthetic_trace_that_draws_no_request_is_refused_as_a_trace_of_zeros_is(tmp_path: Path) -> None:
    """0.0001 requests/s for an hour is 0.36 requests expected: seed 0 draws none, and the run reported
    "0.00 x oracle" for every policy, where a trace file of only zeros is refused."""
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--synthetic", "--models", "5", "--hours", "1", "--rps", "0.0001", "--out",
                             str(out), "--quiet"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (f"{FAILED}the synthetic trace (mixed, seed 0) drew no request: 5 models at "
                                     "--rps 0.0001 for --hours 1: nothing to replay; give a larger --rps or --hours")
    assert not out.exists()


@pytest.mark.parametrize("out", ["", "  "])
def test_an_empty_out_is_refused_not_taken_for_the_current_directory(tmp_path: Path, out: str) -> None:
    """`--out ''` (a shell variable left unset: --out "$DIR") wrote the report into the current directory."""
    result = subprocess.run([*SIMULATE, "--synthetic", "--hours", "0.1", "--out", out, "--quiet"],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == ("modelmesh-autoscaler simulate: error: argument --out: empty: give a directory "
                                     "(--out . for the current one)"), result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--min-churn-age", "-5", "must be 0 (off) or more, got '-5'"),  # said "must be greater than 0", though 0 is off
    ("--min-churn-age", "5 min", "expected a number of seconds, got '5 min' (a number of seconds, or one with a "
                                 "unit: 500ms, 30s, 5m, 1h)"),
    ("--min-churn-age", "nan", "must be a finite number, got 'nan'"),
    ("--scaleup-rpm", "9", "must be 10 to 2147483647 (ModelMesh refuses a threshold under 10 rpm), got '9'"),
    ("--scaleup-rpm", "1e3", "expected a whole number, got '1e3'"),
])
def test_a_bad_cluster_flag_says_what_it_may_be(tmp_path: Path, flag: str, value: str, said: str) -> None:
    result = subprocess.run([*SIMULATE, "--synthetic", flag, value, "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"modelmesh-autoscaler simulate: error: argument {flag}: {said}"


def test_a_max_replicas_below_the_peaks_need_is_named_as_what_delays_not_modelmesh(tmp_path: Path) -> None:
    # 5 models at 30 to 150 req/s (450 in all) need 29 pods of 20 req/s at 80% busy; maxReplicas 2 serves a
    # fraction. The bound's delays then wait for pods maxReplicas does not allow (fixed, at 29 pods, delays far
    # less), not for ModelMesh's copies: the words must not send the user away from --max-replicas.
    trace = five_models(tmp_path, 1800)
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(out), "--max-replicas", "2",
                             "--no-plot", "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["policies"]["fixed"]["delayed_requests"] < report["bound"]["delayed_requests"]
    for text in (result.stdout, (out / "report.md").read_text()):
        assert "no replica policy removes them" not in text
        assert "maxReplicas (2) is below the 29 pods the peak needs at 80% busy" in text
        assert "raise --max-replicas" in text


MANIFESTS = Path(__file__).resolve().parents[2] / "manifests" / "examples"


def run_with_behavior(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,model,requests\n0,a,600\n60,a,600\n")
    behavior = tmp_path / "hpa.yaml"
    behavior.write_text(text)
    return subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"), "--hpa-behavior",
                           str(behavior), "--policies", "skew-aware", "--no-plot", "--quiet"],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("text", "message"), [
    ("kind: HorizontalPodAutoscaler\nspec:\n", "spec: expected a mapping"),
    ("behavior:\n  scaleDown:\n    policies:\n    - {type: Pods, value: 1}\n",
     "behavior.scaleDown: policy 1 has no periodSeconds"),
    ("behavior:\n  scaleDown:\n    stabilizationWindowSeconds: 5m\n",
     "behavior.scaleDown: stabilizationWindowSeconds must be a whole number of seconds, got '5m'"),
    ("behavior:\n  scaleUp:\n    policies:\n    - {type: Pods, value: four, periodSeconds: 15}\n",
     "behavior.scaleUp: policy 1: value must be a whole number, got 'four'"),
    ("behavior:\n  scaleUp:\n    policies: {type: Pods}\n", "behavior.scaleUp: policies must be a list"),
    ("---\nkind: Service\n---\nkind: ConfigMap\n", "no HorizontalPodAutoscaler among its 2 documents"),
    # A typo'd field was left out without a word and its rule ran with the default (the API server refuses it)
    ("behavior:\n  scaleDown:\n    stabilisationWindowSeconds: 60\n",
     "behavior.scaleDown: unknown field 'stabilisationWindowSeconds' (did you mean 'stabilizationWindowSeconds'?)"),
    ("behavior:\n  scaledown:\n    selectPolicy: Min\n",
     "behavior: unknown field 'scaledown' (did you mean 'scaleDown'?)"),
    ("behavior:\n  scaleUp:\n    policies:\n    - {type: Pods, value: 1, periodSecond: 15}\n",
     "behavior.scaleUp: policy 1: unknown field 'periodSecond' (did you mean 'periodSeconds'?)"),
    ("kind: HorizontalPodAutoscaler\nspec:\n  maxReplicas: 4\n  behaviour:\n    scaleDown: {selectPolicy: Min}\n",
     "spec: unknown field 'behaviour' (did you mean 'behavior'?)"),
    ("apiVersion: v1\nkind: List\nitems: []\n", "no HorizontalPodAutoscaler among the 0 items of its List"),
    # No policy at all froze that direction's scaling without a word; the API server refuses it (HPAScalingRules:
    # "At least one policy must be specified")
    ("behavior:\n  scaleUp:\n    policies: []\n", "behavior.scaleUp: policies is empty: at least one policy must be "
     "given (the API server refuses none); leave policies out for the default ones"),
    ("kind: HorizontalPodAutoscaler\nspec:\n  behavior:\n    scaleDown: {selectPolicy: Min, policies: []}\n",
     "behavior.scaleDown: policies is empty: at least one policy must be given"),
])
def test_a_bad_behavior_file_is_refused_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    result = run_with_behavior(tmp_path, text)
    assert result.returncode == 2, result.stderr
    assert f"{FAILED}{tmp_path / 'hpa.yaml'}: {message}" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_manifest_file_with_the_hpa_among_other_documents_is_read(tmp_path: Path) -> None:
    # As kustomize writes it, or a file holding a runtime's RuntimeScale and its HPA: the HPA's behavior counts.
    documents = [(MANIFESTS / name).read_text() for name in ("runtime-scale-triton.yaml", "hpa-triton.yaml")]
    result = run_with_behavior(tmp_path, "\n---\n".join(documents))
    assert result.returncode == 0, result.stderr


def test_kubectl_get_hpa_o_yaml_as_it_prints_is_read(tmp_path: Path) -> None:
    """Without a name `kubectl get hpa -o yaml` prints a List of them, with status and metadata; it was read as a
    bare behavior with no rules: the default behavior, silently."""
    hpa = yaml.safe_load((MANIFESTS / "hpa-triton.yaml").read_text())
    hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = 42
    hpa["metadata"].update(uid="1b2c", resourceVersion="12345", creationTimestamp="2026-12-01T10:00:00Z")
    hpa["status"] = {"currentReplicas": 3, "desiredReplicas": 3, "conditions": [{"type": "ScalingActive"}]}
    listing = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                              "items": [hpa]})
    result = run_with_behavior(tmp_path, listing)
    assert result.returncode == 0, result.stderr
    description = json.loads((tmp_path / "out" / "report.json").read_text())["policies"]["skew-aware"]["description"]
    assert "scaleDown: window 42s" in description, description


def test_the_projects_keda_scaled_object_is_read_as_the_hpa_keda_makes(tmp_path: Path) -> None:
    """manifests/examples/keda/scaled-object-triton.yaml was refused as "a ScaledObject, not a
    HorizontalPodAutoscaler": a KEDA user had to deploy it and fetch KEDA's HPA. Its behavior is read from
    spec.advanced.horizontalPodAutoscalerConfig.behavior (the scale-down hpa-triton.yaml ships), and its
    minReplicaCount/maxReplicaCount are the HPA's bounds, and the warning that they are not the run's names them
    so (it said minReplicas and maxReplicas, which a reader looks for in the file in vain)."""
    result = run_with_behavior(tmp_path, (MANIFESTS / "keda" / "scaled-object-triton.yaml").read_text())
    assert result.returncode == 0, result.stderr
    assert result.stderr == (f"simulate: warning: {tmp_path / 'hpa.yaml'}: its minReplicaCount 1 and "
                             "maxReplicaCount 10 are not this run's replicas 2..3: give --min-replicas 1 "
                             "--max-replicas 10 to simulate them\n")
    description = json.loads((tmp_path / "out" / "report.json").read_text())["policies"]["skew-aware"]["description"]
    assert "scaleDown: window 0s, Max of [100% per 15s]" in description, description


def test_a_scaled_object_without_behavior_runs_the_controllers_rules_and_says_so(tmp_path: Path) -> None:
    """KEDA gives its HPA no behavior then: the controller's rules without one, as for an HPA without one."""
    result = run_with_behavior(tmp_path, "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nspec:\n"
                                         "  scaleTargetRef: {name: triton}\n  maxReplicaCount: 3\n")
    assert result.returncode == 0, result.stderr
    description = json.loads((tmp_path / "out" / "report.json").read_text())["policies"]["skew-aware"]["description"]
    assert "none (the controller's rules without behavior" in description, description


def test_the_report_says_which_hpa_behavior_skew_aware_ran_with(tmp_path: Path) -> None:
    # A user who passes the HPA they run must be able to see in the report that it was the one simulated.
    result = run_with_behavior(tmp_path, "spec:\n  behavior:\n    scaleDown:\n      selectPolicy: Disabled\n"
                                         "    scaleUp:\n      policies:\n"
                                         "      - {type: Percent, value: 50, periodSeconds: 60}\n")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    description = report["policies"]["skew-aware"]["description"]
    assert "scaleUp: window 0s, Max of [50% per 60s]" in description
    # It read "scaleDown: window 300s, Disabled of [100% per 15s]": a window and policies that do nothing
    assert "scaleDown: disabled (selectPolicy Disabled: the HPA never scales down)" in description
    assert description.startswith("skew-aware: ")  # report.md names the policy once, before its description
    said = (tmp_path / "out" / "report.md").read_text()
    assert f"- **skew-aware**: {description.removeprefix('skew-aware: ')}\n" in said


WITHOUT_NUMPY = """
import sys
sys.modules["numpy"] = None  # importing numpy fails, as where the `simulate` extra is not installed
from autoscaler.cli import main
main(sys.argv[1:])
"""


def test_a_refused_hpa_file_or_synthetic_size_is_said_before_the_simulator_is_imported(tmp_path: Path) -> None:
    """What needs only the flags and the HPA file is checked before numpy and the simulator are imported, half a
    refusal's time (0.3 CPU-s): here numpy cannot be imported at all, and each refusal still reads as it does."""
    behavior = tmp_path / "hpa.yaml"
    behavior.write_text("behavior:\n  scaleDown:\n    stabilizationWindowSeconds: 5m\n")
    for flags, said in ((["--hpa-behavior", str(behavior)], f"{behavior}: behavior.scaleDown: "
                         "stabilizationWindowSeconds must be a whole number of seconds, got '5m'"),
                        (["--models", "5", "--hours", "1e9"],
                         "--hours 1e+09 is more than the synthetic trace makes (8,760, a year)")):
        result = subprocess.run([sys.executable, "-c", WITHOUT_NUMPY, "simulate", "--synthetic", *flags, "--out",
                                 str(tmp_path / "out"), "--quiet"], capture_output=True, text=True, timeout=60)
        assert (result.returncode, result.stderr.strip()) == (2, f"{FAILED}{said}: give a smaller one"
                                                              if "--models" in flags else f"{FAILED}{said}")
        assert not (tmp_path / "out").exists()


def test_the_bounds_of_the_policy_file_show_in_skew_awares_description(tmp_path: Path) -> None:
    # The adapter caps its recommendation at the policy file's max_replicas: skew-aware ran 2..3, not the
    # HPA's 2..maxReplicas the description said.
    config = tmp_path / "policy.yaml"
    config.write_text("defaults:\n  max_replicas: 3\n")
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,model,requests\n" + "".join(f"{60 * m},a,6000\n" for m in range(10)))
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(out), "--config", str(config),
                             "--policies", "skew-aware", "--no-plot", "--quiet"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["cluster"]["max_replicas"] > 3
    assert "replicas 2..3;" in report["policies"]["skew-aware"]["description"]
    assert report["policies"]["skew-aware"]["peak_replicas"] == 3  # it starts within them too


def test_settings_the_run_does_not_honour_as_given_are_warned_about(tmp_path: Path) -> None:
    """A tick past ModelMesh's 10 s rate check runs that check (and the HPA's 15 s sync) once a tick, which
    delays copies and scaling (a 60 s tick raised fixed's delays 2.3x on a 15 s trace); a config's `runtimes:`
    entries are not read (one simulated runtime takes `defaults:`). The run goes on, and stderr says so."""
    config = tmp_path / "policy.yaml"
    config.write_text("defaults:\n  target_gpu_busy: 0.7\nruntimes:\n"
                      "  - {namespace: ml, deployment: modelmesh-serving-triton, target_rps_per_pod: 50}\n")
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,model,requests\n" + "".join(f"{60 * m},a,600\n" for m in range(10)))
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"), "--tick", "60",
                             "--config", str(config), "--policies", "skew-aware", "--no-plot", "--quiet"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "warning: --tick 60 is longer than ModelMesh's 10 s rate check" in result.stderr
    assert "warning: ignoring the 1 runtimes: entry" in result.stderr
    assert (tmp_path / "out" / "report.json").exists()


def test_a_run_sized_to_thousands_of_pods_says_why_it_is_slow(tmp_path: Path) -> None:
    """A wrong --pod-rps (or a trace of rates where counts belong) sizes thousands of pods, and each policy
    then simulates them all: without a word the run looks hung."""
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,model,requests\n0,a,60000\n60,a,60000\n")  # 1,000 requests/s
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"), "--pod-rps", "0.5",
                             "--policies", "fixed", "--no-plot", "--quiet"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    # 1,000 requests/s at 0.5 a pod: 2,000 pods at full capacity; maxReplicas twice that
    assert "needs 2,000 pods, which size maxReplicas 4,000 (twice that)" in result.stderr, result.stderr
    assert "--pod-rps (what one pod serves at 100% busy)" in result.stderr


@pytest.mark.parametrize("where", ["a-file", "under-a-file", "read-only"])
def test_an_out_directory_that_cannot_be_written_is_one_line_before_the_run(tmp_path: Path, where: str) -> None:
    """Found before minutes of simulating, not after them as a traceback."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # /proc takes no new entries, from root either (a 0o555 directory would not stop root, as CI runs)
    out = {"a-file": blocker, "under-a-file": blocker / "out", "read-only": Path("/proc/modelmesh-out/out")}[where]
    result = subprocess.run([*SIMULATE, "--synthetic", "--models", "20", "--hours", "1", "--out", str(out)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()], result.stderr
    assert result.stderr.startswith(f"{FAILED}--out {out}: cannot write there: "), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("flag", ["--config", "--hpa-behavior", "--trace"])
def test_a_file_that_is_not_text_is_named(tmp_path: Path, flag: str) -> None:
    binary = tmp_path / "given.yaml"
    binary.write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")
    source = ["--trace", str(binary)] if flag == "--trace" else ["--synthetic", flag, str(binary)]
    result = subprocess.run([*SIMULATE, *source, "--out", str(tmp_path / "out")], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"{FAILED}{binary}: not UTF-8 text"), result.stderr
    assert not (tmp_path / "out").exists()


def test_the_shipped_configmap_given_as_the_policy_file_is_named_as_such(tmp_path: Path) -> None:
    """configuration.md points at manifests/base/config-map-policy.yaml for the defaults; given to --config as
    it is, the message says it is the ConfigMap, not the file inside it."""
    configmap = Path(__file__).resolve().parents[2] / "manifests" / "base" / "config-map-policy.yaml"
    result = subprocess.run([*SIMULATE, "--synthetic", "--out", str(tmp_path / "out"), "--config", str(configmap)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "a Kubernetes ConfigMap, not the policy file it holds (its data: 'policy.yaml')" in result.stderr


@pytest.mark.parametrize("share", [0.2, 0.6])
def test_ctrl_c_during_a_run_is_one_line_never_a_traceback(tmp_path: Path, share: float) -> None:
    """While importing, while simulating: status 130 and 'interrupted.'. The moments are shares of the time a run
    of a twelfth of the trace takes to finish on this machine, now: the run interrupted is still simulating then,
    even where the machine's load fell in between (measured on the same trace, a run sped up by the load falling
    had finished before its Ctrl-C)."""
    def command(hours: int) -> list[str]:
        return [*SIMULATE, "--synthetic", "--models", "50", "--hours", str(hours), "--out", str(tmp_path / "out"),
                "--quiet"]
    # Twelve hours where the moment is measured on one: a CI run whose load fell between the two finished a run of
    # three before its Ctrl-C. Interrupted, the longer run costs nothing.
    run = ctrl_c_after(command(12), moment_of_start_up(command(1), "report: ", share))
    assert run.ended_by_ctrl_c, run.output
    assert "Traceback" not in run.output and run.output.strip().splitlines()[-1] == "interrupted.", run.output


def test_a_pandas_export_with_its_index_and_extra_columns_runs_and_says_what_it_ignored(tmp_path: Path) -> None:
    """`DataFrame.to_csv()` writes the index as an unnamed first column; a BigQuery or spreadsheet export keeps
    columns the trace does not need. Both were refused ("unexpected column ''", with no fix); the three columns
    are found by name, so the others are left out and the run says which."""
    trace = tmp_path / "export.csv"
    trace.write_text(",timestamp_s,model,requests,region\r\n"
                     + "".join(f"{i},2024-12-01 00:0{i // 2}:00,{'ab'[i % 2]},{30 + i},eu\r\n" for i in range(8))
                     + "\r\n")
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(out), "--policies", "fixed",
                             "--no-plot", "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ("simulate: warning: ignoring 2 columns of the trace not used: an unnamed one "
                             "(pandas' index), 'region'\n")
    report = json.loads((out / "report.json").read_text())
    assert report["trace"]["requests"] == sum(30 + i for i in range(8))
    assert (report["trace"]["models"], report["trace"]["interval_s"]) == (2, 60.0)


@pytest.mark.parametrize("flags", [
    ["--trace", "missing.csv"],  # the run's own error (was: "simulate: missing.csv: cannot read trace: ...")
    ["--synthetic", "--hours", "abc"],  # a flag's, from argparse
    ["--trace", "missing.csv", "--synthetic"],  # flags that go apart, from argparse
], ids=["input", "flag-value", "flags-together"])
def test_every_error_of_simulate_starts_the_same(tmp_path: Path, flags: list[str]) -> None:
    result = subprocess.run([*SIMULATE, *flags, "--out", str(tmp_path / "d"), "--quiet", "--no-plot"],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1].startswith("modelmesh-autoscaler simulate: error: "), result.stderr


@pytest.mark.parametrize("header, named", [
    ("region,timestamp_s,model,requests", "'region'"),  # named, first: was "an unnamed one (pandas' index)"
    (",timestamp_s,model,requests", "an unnamed one (pandas' index)"),
    ("timestamp_s,,model,requests", "an unnamed one"),
])
def test_an_ignored_column_is_named_by_its_header_wherever_it_stands(tmp_path: Path, header: str,
                                                                       named: str) -> None:
    columns = header.split(",")
    values = {"timestamp_s": ("0", "60"), "model": ("a", "a"), "requests": ("10", "20")}
    rows = [",".join(values.get(column, ("eu", "eu"))[i] for column in columns) for i in range(2)]
    trace = tmp_path / "t.csv"
    trace.write_text("\n".join([header, *rows]) + "\n")
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "d"), "--policies", "fixed",
                             "--no-plot", "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"simulate: warning: ignoring 1 column of the trace not used: {named}\n"


def test_hours_without_a_row_are_named_as_read_as_no_traffic(tmp_path: Path) -> None:
    """Two exports pasted together, or a collector down overnight: the hours between had no rows and were
    replayed as no requests at all, the report's pod-hours and oracle ratios counting them without a word."""
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,model,requests\n1733011200,a,600\n1733011260,a,600\n"
                     "1733047200,a,600\n1733047260,a,600\n")
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"), "--policies",
                             "fixed", "--no-plot", "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        "simulate: warning: no rows for 9.97 h between the rows at 1733011260 (2024-12-01T00:01:00Z) and at "
        "1733047200 (2024-12-01T10:00:00Z) (line 4): replayed as no requests at all; if data is missing there "
        "rather than traffic, cut the trace at the gap\n")
    # The report, which outlives the terminal (and is what gets shared), says it too.
    warning = result.stderr.removeprefix("simulate: warning: ").strip()
    assert json.loads((tmp_path / "out" / "report.json").read_text())["warnings"] == [warning]
    assert f"- {warning}" in (tmp_path / "out" / "report.md").read_text()


def test_a_whole_hpa_whose_replica_bounds_are_not_the_runs_says_so(tmp_path: Path) -> None:
    """A user gives the HPA copied from the cluster, maxReplicas 10 in it; only its behavior is read and the run
    sized its own bounds (2..3 here) without a word: the report looked like the cluster's HPA and was not."""
    result = run_with_behavior(tmp_path, (MANIFESTS / "hpa-triton.yaml").read_text())
    assert result.returncode == 0, result.stderr
    assert result.stderr == (f"simulate: warning: {tmp_path / 'hpa.yaml'}: its minReplicas 1 and maxReplicas 10 "
                             "are not this run's replicas 2..3: give --min-replicas 1 --max-replicas 10 to "
                             "simulate them\n")


def test_reading_a_trace_shows_a_bar_unless_quiet(tmp_path: Path) -> None:
    """The trace's reading has a bar of its own before the policies' (a big export takes minutes to read)."""
    trace = five_models(tmp_path, 3)
    for quiet, bars in (([], 1), (["--quiet"], 0)):
        result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"),
                                 "--policies", "fixed", "--no-plot", *quiet], capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, result.stderr
        assert len([line for line in result.stderr.splitlines() if line.lstrip("\r").startswith("reading")]) == bars


def test_the_need_weights_of_the_policy_file_show_in_skew_awares_description(tmp_path: Path) -> None:
    # Comparing need_weight_unique 0 with the default, the two reports' descriptions read the same: nothing
    # said which weights ranked the pods to remove, so a run whose file was not applied looked like one that was.
    config = tmp_path / "policy.yaml"
    config.write_text("defaults:\n  need_weight_unique: 0\n  need_weight_cache: 3\n")
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,model,requests\n" + "".join(f"{60 * m},a,600\n" for m in range(5)))
    descriptions = []
    for name, extra in (("given", ["--config", str(config)]), ("built-in", [])):
        out = tmp_path / name
        result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(out), *extra,
                                 "--policies", "skew-aware", "--no-plot", "--quiet"], capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        descriptions.append(json.loads((out / "report.json").read_text())["policies"]["skew-aware"]["description"])
    given, built_in = descriptions
    assert "need weights requests 0.5, gpu 0.5, cache 3, unique 0" in given
    assert "need weights requests 0.5, gpu 0.5, cache 2, unique 1" in built_in


@pytest.mark.parametrize("churn_age", ["300", "0"])
def test_requests_a_full_cache_refuses_to_load_for_are_reported_as_failed(tmp_path: Path, churn_age: str) -> None:
    """One pod holding one model, two models taking turns each minute: ModelMesh's churn limit (300 s by default)
    refuses each load while the held model was used within it, and the report says how many requests failed;
    with `--min-churn-age 0` every turn is a cold load instead."""
    trace = tmp_path / "turns.csv"
    trace.write_text("timestamp_s,model,requests\n" + "".join(
        f"{60 * i},{'ab'[i % 2]},6\n" for i in range(10)))
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(out), "--policies", "fixed",
                             "--min-replicas", "1", "--cache-models", "1", "--min-churn-age", churn_age,
                             "--no-plot", "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    fixed = json.loads((out / "report.json").read_text())["policies"]["fixed"]
    said = (out / "report.md").read_text()
    if churn_age == "0":
        assert fixed["refused_requests"] == 0 and fixed["cold_loads"] == 9
        assert "requests failed" not in said
    else:  # model a stays (used every other minute); b's 6 requests a turn fail, 5 turns
        assert fixed["refused_requests"] == 30 and fixed["cold_loads"] == 0
        assert fixed["delayed_requests"] >= 30
        assert "30 requests failed (of the delayed): every pod's cache full with copies used within the last " \
               "300 s" in said


def test_a_refused_load_is_tried_again_by_the_next_request_not_at_the_next_interval(tmp_path: Path) -> None:
    """ModelMesh keeps no record of a churn refusal ("Cache churn threshold exceeded" is thrown before the load
    starts, and `updateLocalModelRecordAfterRemoteLoadFailure` records nothing for it): every request of a model
    no pod holds goes through the cache-miss loop again. One pod of two copies: b used at 0, a at 0 and 120; c
    comes at 240 at 2 req/s for two minutes. b's copy is 240 s old, under the 300 s limit, so c's requests fail
    until 300 s, when the next one loads c in b's place: 60 s of them fail (120), and 10 s wait for the load
    (20 delayed). The simulator failed all 240 of the two-minute row, as if the refusal held until the next row."""
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp_s,model,requests\n0,a,120\n0,b,120\n120,a,120\n240,c,240\n")
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(out), "--policies", "fixed",
                             "--min-replicas", "1", "--cache-models", "2", "--no-plot", "--quiet"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    fixed = json.loads((out / "report.json").read_text())["policies"]["fixed"]
    assert fixed["requests"] == 600
    assert fixed["refused_requests"] == 120
    assert fixed["cold_loads"] == 1
    assert fixed["delayed_waiting_for_loads"] == 20
    assert fixed["delayed_requests"] == 140


def many_quiet_models(tmp_path: Path) -> Path:
    """An hour at 60 s intervals: 40 models at 6 requests a minute each (4 req/s in all)."""
    trace = tmp_path / "quiet.csv"
    trace.write_text("timestamp_s,model,requests\n" + "".join(
        f"{60 * minute},model-{i},6\n" for minute in range(60) for i in range(40)))
    return trace


def test_the_default_max_replicas_holds_the_models_in_use_not_only_the_requests(tmp_path: Path) -> None:
    """40 models at 0.1 req/s each: their 4 req/s need one pod of 20 req/s, but holding them, 4 copies a pod,
    needs 10. maxReplicas was twice the requests' need, 3 (minReplicas 2 + 1), and skew-aware sat at it all hour
    with most requests failing (ModelMesh's churn limit refusing loads on pods full of copies in use), a bound
    the user had not chosen and the report did not name. It is now twice the larger need: 20."""
    trace = many_quiet_models(tmp_path)
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(out), "--cache-models", "4",
                             "--no-plot", "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert (report["cluster"]["max_replicas"], report["cluster"]["peak_pods"]) == (20, 10)
    skew = report["policies"]["skew-aware"]
    assert "max_replicas" not in skew["terms"] and skew["peak_replicas"] < 20  # its own need decided, not the bound
    assert skew["refused_requests"] < 0.1 * skew["requests"]
    assert report["policies"]["fixed-max"]["refused_requests"] == 0


def test_a_max_replicas_below_what_the_models_in_use_need_is_named(tmp_path: Path) -> None:
    """The same hour at --max-replicas 3 (the former default): every policy is short of pods to hold the models,
    and the bound's words sent the user to ModelMesh's copy timing ("no replica policy removes them")."""
    trace = many_quiet_models(tmp_path)
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(out), "--cache-models", "4",
                             "--max-replicas", "3", "--no-plot", "--quiet"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    skew = report["policies"]["skew-aware"]
    assert skew["terms"]["max_replicas"] > 0 and skew["refused_requests"] > 0.5 * skew["requests"]
    for text in (result.stdout, (out / "report.md").read_text()):
        assert "no replica policy removes them" not in text
        assert "maxReplicas (3) is below the 10 pods the peak needs to hold the models it uses" in text


def test_a_model_column_of_request_ids_is_refused_naming_the_column(tmp_path: Path) -> None:
    """A request log binned by its request id rather than its model: 12,000 "models" at --cache-models 1 need
    12,000 pods to hold, which now sizes maxReplicas (24,000, past what simulate runs); the refusal names the
    model column, not --pod-rps and the request counts, which are fine."""
    trace = tmp_path / "ids.csv"
    trace.write_text("timestamp_s,model,requests\n" + "".join(f"0,req-{i},1\n" for i in range(12_000))
                     + "60,req-0,1\n")
    result = subprocess.run([*SIMULATE, "--trace", str(trace), "--out", str(tmp_path / "out"), "--cache-models",
                             "1", "--no-plot", "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert ("need 12,000 pods, which size maxReplicas 24,000 (twice that): more pods than simulate runs (20,000)"
            in result.stderr), result.stderr
    assert "Check the trace's model column (a model's name, not a request's id)" in result.stderr
    assert not (tmp_path / "out").exists()


def test_choices_are_taken_in_any_letter_case_as_serves_are(tmp_path: Path) -> None:
    """`--shape STEADY` and `--policies Mean-HPA` were refused ("invalid choice"), while `serve` takes
    `--source SCRAPE`: one command line, one rule."""
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--synthetic", "--models", "5", "--hours", "0.1", "--shape", "STEADY",
                             "--policies", "Mean-HPA, Skew-Aware", "--out", str(out), "--no-plot", "--quiet"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert list(report["policies"]) == ["mean-hpa", "skew-aware"]
