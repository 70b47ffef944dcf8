"""`modelmesh-autoscaler simulate`: replay a trace under each policy and write the report (docs/design.md)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from autoscaler.cli import PROG
from autoscaler.policies import strict_yaml
from autoscaler.policies.config import ConfigError
from autoscaler.policies.config_file import load_policy_book
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.yaml_errors import yaml_error_text
from autoscaler.simulation.cluster_flag_values import (
    CACHE_MODELS_RANGE,
    MIN_CHURN_AGE_RANGE_S,
    POD_RPS_RANGE,
    POD_WAIT_RANGE_S,
    SLO_QUEUE_RANGE_MS,
    TICK_RANGE_S,
    cache_models,
    min_churn_age,
    pod_rps,
    pod_wait,
    slo_queue_ms,
    tick,
)
from autoscaler.simulation.figures import figure
from autoscaler.simulation.goal_ceiling import goal_ceiling_text
from autoscaler.simulation.hpa import SYNC_PERIOD_S, Behavior
from autoscaler.simulation.hpa_manifest import behavior_from_manifest, hpa_of_scaled_object
from autoscaler.simulation.memory_room import ADVICE, LIMITS, SYNTHETIC_ADVICE
from autoscaler.simulation.outputs import discard, write_together
from autoscaler.simulation.progress_bar import ProgressBar
from autoscaler.simulation.rate_check import DEFAULT_SCALEUP_RPM, RATE_CHECK_S, SCALEUP_RPM_RANGE
from autoscaler.simulation.rerun import Rerun, given_flags
from autoscaler.simulation.run_size import RunSize, fixed_why, short_of_cache, short_of_requests, sizing
from autoscaler.simulation.shapes import SHAPES
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR
from autoscaler.simulation.standard_input import argument_path, input_name
from autoscaler.simulation.stuck_copies import crowded_note
from autoscaler.simulation.stuck_copies import note as stuck_note
from autoscaler.simulation.synthetic_size import (
    MAX_MODEL_HOURS,
    MAX_SYNTHETIC_HOURS,
    MAX_SYNTHETIC_MODELS,
    MAX_SYNTHETIC_RPS,
    check_synthetic_size,
)
from autoscaler.simulation.trace_head import check_head
from exporter.env_flags import Switch
from exporter.flag_values import count, positive, whole_number, whole_number_within

if TYPE_CHECKING:
    from autoscaler.simulation.cluster import ClusterShape
    from autoscaler.simulation.engine import Oracle, PolicyResult
    from autoscaler.simulation.policies import SkewAwarePolicy
    from autoscaler.simulation.report import RunInfo
    from autoscaler.simulation.trace import Buckets, Trace

ERROR: Final = f"{PROG} simulate: error: "
"""How a run's error starts: as argparse starts the errors of the flags (`autoscaler.cli`), so that every error of
`simulate` reads the same (its own ones said `simulate: ...`)."""

ADVICE_CHOICES: Final = ("measure", "off")
"""--advice: replay each setting the report may advise (`advice.advice`), or list them unmeasured."""

POLICY_NAMES: Final = ("fixed", "fixed-max", "mean-hpa", "skew-aware")
"""`fixed-max` (maxReplicas throughout the trace) is the bound: the fewest delays any replica policy gets."""


def out_dir(value: str) -> Path:
    """--out: a directory named, not an empty one. `--out ''` (a shell variable left unset: --out "$DIR") was
    read as the current directory, and a blank name as a directory of spaces."""
    if not value.strip():
        raise argparse.ArgumentTypeError("empty: give a directory (--out . for the current one)")
    return Path(value)


def scaleup_rpm(value: str) -> int:
    """--scaleup-rpm: a whole number of requests per minute within `SCALEUP_RPM_RANGE`."""
    lowest, highest = SCALEUP_RPM_RANGE
    return whole_number_within(value, lowest, highest,
                               f"{lowest} to {highest} (ModelMesh refuses a threshold under {lowest} rpm)")


def _lower(value: str) -> str:
    """A choice as written in any letter case, as `serve` takes its choices (`--source SCRAPE`)."""
    return value.strip().lower()


def _policies(value: str) -> tuple[str, ...]:
    names = tuple(_lower(p) for p in value.split(",") if p.strip())
    unknown = [n for n in names if n not in POLICY_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown policy {unknown[0] if unknown else value!r}; choose from "
                                         f"{','.join(POLICY_NAMES)}")
    once = tuple(dict.fromkeys(names))
    if once != names:  # a repeat was simulated again (twice the wait) and the report, keyed by name, showed it once
        repeated = next(n for i, n in enumerate(names) if n in names[:i])
        raise argparse.ArgumentTypeError(f"{repeated} is listed twice; name each policy once (--policies "
                                         f"{','.join(once)})")
    return names


def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", metavar="FILE.csv", type=argument_path,
                        help="CSV (or .csv.gz) with the columns timestamp_s,model,requests: the requests (a "
                             "count, not a rate) that arrived for the model in the interval starting at "
                             "timestamp_s (epoch seconds or ISO 8601, read as UTC where it has no zone; "
                             "intervals of 1 s to 10 min); or a per-minute table, a row per model and columns 1, 2, "
                             "... N (Azure Functions' "
                             "invocations_per_function files as they come; python -m "
                             "autoscaler.simulation.minute_table joins days and keeps the busiest); a log of "
                             "single requests converts with python -m autoscaler.simulation.request_log. - reads "
                             "standard input (plain or gzip)")
    source.add_argument("--synthetic", action="store_true", help="use the built-in trace generator instead")
    parser.add_argument("--out", metavar="DIR", type=out_dir, required=True,
                        help="directory for report.json, report.md, timeline.png")
    parser.add_argument("--policies", metavar="LIST", type=_policies, default=POLICY_NAMES,
                        help="comma-separated, from fixed,fixed-max,mean-hpa,skew-aware (default: all four; "
                             "fixed-max, maxReplicas throughout the trace, is the bound no replica policy beats)")
    parser.add_argument("--config", metavar="FILE", type=Path,
                        help="the adapter's policy file (its `defaults:` are used)")
    parser.add_argument("--hpa-behavior", metavar="FILE", type=Path,
                        help="HPA manifest (or a YAML with `behavior:`, or a KEDA ScaledObject: the HPA KEDA "
                             "makes; in a file of several manifests, its HorizontalPodAutoscaler) whose behavior "
                             "skew-aware uses; default: the shipped one")
    # The synthetic trace's flags default to None (SYNTHETIC holds their defaults): one given with --trace is
    # refused rather than left out without a word
    synth = parser.add_argument_group("synthetic trace (with --synthetic only)")
    synth.add_argument("--seed", metavar="N", type=whole_number, help="seed of the synthetic trace (default 0)")
    synth.add_argument("--models", metavar="N", type=count,
                       help=f"models, at most {MAX_SYNTHETIC_MODELS:,} (default 500)")
    synth.add_argument("--hours", metavar="HOURS", type=positive,
                       help=f"hours, at most {MAX_SYNTHETIC_HOURS:,} (a year), and --models x --hours at most "
                            f"{MAX_MODEL_HOURS:,} model-hours (a day of {MAX_MODEL_HOURS // 24:,} models) (default 24)")
    synth.add_argument("--rps", metavar="REQ/S", type=positive,
                       help=f"mean total requests per second, at most {MAX_SYNTHETIC_RPS:,} (default 150)")
    synth.add_argument("--shape", type=_lower, choices=SHAPES,
                       help="popularity and time shape (default mixed: Zipf, daily cycle, bursts, churn)")
    shape = parser.add_argument_group("cluster")
    shape.add_argument("--pod-rps", metavar="REQ/S", type=pod_rps, default=20.0,
                       help=f"requests per second one pod serves at 100%% busy, {POD_RPS_RANGE[0]:g} to "
                            f"{POD_RPS_RANGE[1]:g} (default 20)")
    shape.add_argument("--cache-models", metavar="N", type=cache_models, default=100,
                       help=f"model copies one pod holds, {CACHE_MODELS_RANGE[0]} to {CACHE_MODELS_RANGE[1]} "
                            "(default 100)")
    shape.add_argument("--load-time", metavar="SECONDS", type=pod_wait, default=10.0,
                       help=f"seconds to load a model, {POD_WAIT_RANGE_S[0]:g} to {POD_WAIT_RANGE_S[1]:g} (default 10)")
    shape.add_argument("--load-concurrency", metavar="N", type=count, default=1,
                       help="models one pod loads at a time, the runtime's maxLoadingConcurrency; the rest wait in "
                            "its loading queue, a load a request waits for first: paces cold loads, the rate "
                            "check's extra copies and those a scale-down's pre-shutdown sends to the pods that stay "
                            "(default 1, as ModelMesh Serving's built-in adapters)")
    shape.add_argument("--startup-delay", metavar="SECONDS", type=pod_wait, default=30.0,
                       help=f"seconds until a new pod is Ready, {POD_WAIT_RANGE_S[0]:g} to {POD_WAIT_RANGE_S[1]:g} "
                            "(default 30)")
    shape.add_argument("--min-churn-age", metavar="SECONDS", type=min_churn_age, default=300.0,
                       help="a full pod whose least recently used model is younger refuses a load and the request "
                            "fails, as ModelMesh's tas.min_churn_age_ms (10x max(3 s, the runtime's load timeout / "
                            f"3)); {MIN_CHURN_AGE_RANGE_S[0]:g} to {MIN_CHURN_AGE_RANGE_S[1]:g}, 0: never (default "
                            "300, for modelmesh-serving's 90 s load timeout)")
    shape.add_argument("--queue-untimed", action=Switch, default=False,
                       help="ModelMesh times no request queue, as on modelmesh-serving's built-in runtimes unless "
                            "the ServingRuntime is annotated perModelConcurrencyLimit: the exporter reports a queue "
                            "delay of 0, so the queue term never decides (requests still queue and count as "
                            "delayed), and ModelMesh, not latency-based, copies a model only when one copy takes "
                            "2000 rpm (--scaleup-rpm); default: the queue timed")
    shape.add_argument("--scaleup-rpm", metavar="RPM", type=scaleup_rpm, default=DEFAULT_SCALEUP_RPM,
                       help="with --queue-untimed, the requests per minute one copy takes before ModelMesh asks for "
                            "another: the runtime's MM_SCALEUP_RPM_THRESHOLD, or the kv-store's "
                            "scaleup_rpm_threshold, which overrides it at run time; it also marks copies heavy at 3/4 "
                            "of it and keeps a third copy over 2/3. Ignored timed, where ModelMesh measures each "
                            f"copy instead ({SCALEUP_RPM_RANGE[0]} to {SCALEUP_RPM_RANGE[1]}, default 2000 as "
                            "ModelMesh's)")
    shape.add_argument("--min-replicas", metavar="N", type=count, default=2, help="HPA minReplicas (default 2)")
    shape.add_argument("--max-replicas", metavar="N", type=count, default=None,
                       help="HPA maxReplicas (default: twice what the trace's peak needs: pods to serve its "
                            "requests at full capacity or, where more, to hold the models used within "
                            "target_lru_age_s, 600 s, in --cache-models copies each)")
    shape.add_argument("--tick", metavar="SECONDS", type=tick, default=5.0,
                       help=f"simulation step in seconds, {TICK_RANGE_S[0]:g} to {TICK_RANGE_S[1]:g} (default 5)")
    shape.add_argument("--slo-queue-ms", metavar="MS", type=slo_queue_ms, default=100.0,
                       help="a request waiting longer than this in a queue is delayed, "
                            f"{SLO_QUEUE_RANGE_MS[0]:g} to {SLO_QUEUE_RANGE_MS[1]:g} (default 100)")
    parser.add_argument("--advice", type=_lower, choices=ADVICE_CHOICES, default="measure",
                        help="where skew-aware missed a part of the goal, the settings that may move it are each "
                             "replayed on this trace, skew-aware alone against mean-hpa's run (at most nine more "
                             "replays of skew-aware, none for a part out of reach), and only those that moved it are "
                             "advised, with what they did; off: list them unmeasured (default measure)")
    parser.add_argument("--no-plot", action=Switch, default=False, help="skip timeline.png (--plot: draw it)")
    parser.add_argument("--quiet", action=Switch, default=False, help="no progress bar")


HPA_KINDS: Final = ("HorizontalPodAutoscaler", "ScaledObject")
"""The kinds whose HPA behavior `--hpa-behavior` reads: an HPA, or a KEDA ScaledObject (the HPA KEDA makes)."""


HPA_BOUNDS: Final = ("minReplicas", "maxReplicas")
KEDA_BOUNDS: Final = ("minReplicaCount", "maxReplicaCount")
"""A ScaledObject's names for the bounds of the HPA KEDA makes: what a warning about them says, as the file does."""


def _behavior(path: Path | None) -> tuple[Behavior | None, dict[str, Any], tuple[str, str]]:
    """The behavior of the HPA in `path` (default: the shipped one), that HPA's spec ({} for a bare
    behavior), whose replica bounds the run compares with its own, and the file's names for those bounds."""
    if path is None:
        return SHIPPED_BEHAVIOR, {}, HPA_BOUNDS
    try:
        documents = [d for d in strict_yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except yaml.YAMLError as exc:
        raise ValueError(yaml_error_text(path, exc)) from exc
    listed = len(documents) == 1 and isinstance(documents[0], dict) and documents[0].get("kind") == "List"
    if listed:  # `kubectl get hpa -o yaml` without a name prints its HPAs as the items of a List
        items = documents[0].get("items")
        documents = items if isinstance(items, list) else []
    if listed or len(documents) > 1:  # or a file of manifests (kustomize's output, a runtime's objects): its HPA
        among = f"the {len(documents)} items of its List" if listed else f"its {len(documents)} documents"
        hpas = [d for d in documents if isinstance(d, dict) and d.get("kind") in HPA_KINDS]
        if len(hpas) != 1:
            raise ValueError(f"{path}: {'no' if not hpas else len(hpas)} HorizontalPodAutoscaler"
                             f"{'s' if len(hpas) > 1 else ''} among {among}; "
                             f"give a file with the one to simulate (kubectl get hpa NAME -o yaml)")
        documents = hpas
    document = documents[0] if documents else None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected an HPA manifest or a mapping with `behavior:`")
    bounds = KEDA_BOUNDS if document.get("kind") == "ScaledObject" else HPA_BOUNDS
    try:
        if bounds == KEDA_BOUNDS:  # KEDA's: read as the HPA it makes
            document = hpa_of_scaled_object(document)
        behavior = behavior_from_manifest(document)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    spec = document.get("spec", document if "behavior" in document else None)  # a spec pasted without `spec:`
    return behavior, spec if isinstance(spec, dict) else {}, bounds


def _other_bounds(path: Path, spec: dict[str, Any], low: int, high: int,
                  bounds: tuple[str, str] = HPA_BOUNDS) -> str | None:
    """The HPA's own minReplicas/maxReplicas where they are not the run's: only its behavior is read, and a user
    giving the HPA copied from the cluster would take the report for a replay of that HPA. Said in the file's
    words (`bounds`): a ScaledObject's minReplicaCount/maxReplicaCount, which the user looks for in it."""
    minimum, maximum = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if not isinstance(maximum, int) or not isinstance(minimum, int) or (minimum, maximum) == (low, high):
        return None
    return (f"{path}: its {bounds[0]} {minimum} and {bounds[1]} {maximum} are not this run's replicas {low}..{high}: "
            f"give --min-replicas {minimum} --max-replicas {maximum} to simulate them")


SYNTHETIC: Final[dict[str, Any]] = {"seed": 0, "models": 500, "hours": 24.0, "rps": 150.0, "shape": "mixed"}
"""The synthetic trace's flags and their defaults. The seed draws the synthetic trace only: the replay itself
is deterministic (placement.py), so a replay of a file is the same for every seed."""


def _synthetic_only(args: argparse.Namespace) -> None:
    """Refuse the synthetic trace's flags given with --trace: left out without a word, a user who asked for
    --hours 2 of a day's trace got the whole day, and took the report for two hours'."""
    given = [f"--{name}" for name in SYNTHETIC if getattr(args, name, None) is not None]
    if args.trace is not None and given:
        raise ValueError(f"{', '.join(given)}: only for --synthetic (a --trace replays as it is): leave "
                         f"{'them' if len(given) > 1 else 'it'} out")


SKEW_AWARE_ONLY: Final = {"--config": "its defaults: shape the skew-aware policy",
                          "--hpa-behavior": "it is the skew-aware policy's HPA"}
"""The flags that shape only skew-aware, and what each is to it."""


def _skew_aware_only(args: argparse.Namespace, policy: RuntimePolicy) -> list[str]:
    """The skew-aware flags given (`--config FILE`) where `--policies` leaves skew-aware out: they do nothing, and
    a user comparing the table with the policy file in mind took it for the file's result. A policy file's
    `target_lru_age_s` also sizes the default maxReplicas that every policy shares: then it does something."""
    if "skew-aware" in args.policies:
        return []
    sizes_max = args.max_replicas is None and policy.target_lru_age_s != RuntimePolicy().target_lru_age_s
    return [f"{flag} {path}" for flag, path in (("--config", args.config), ("--hpa-behavior", args.hpa_behavior))
            if path is not None and not (flag == "--config" and sizes_max)]


def _synthetic(args: argparse.Namespace, name: str) -> Any:
    """A synthetic trace's flag as given, or its default."""
    value = getattr(args, name, None)
    return SYNTHETIC[name] if value is None else value


def _load_trace(args: argparse.Namespace, warn: Callable[[str], None]) -> tuple[Trace, str]:
    """The trace and how the report names it; `warn`: what the reading says before it is done (a file too big for
    the memory left: on stderr only), on a line of its own under a bar left short of its end."""
    from autoscaler.simulation.trace import read_csv, synthetic

    def warn_now(message: str) -> None:
        ProgressBar.end_line()
        warn(message)

    if args.trace is not None:
        name = input_name(args.trace)
        return read_csv(args.trace, None if args.quiet else ProgressBar("reading"), warn=warn_now), name
    models, hours, rps, shape, seed = (_synthetic(args, name) for name in ("models", "hours", "rps", "shape", "seed"))
    trace = synthetic(models=models, hours=hours, mean_rps=rps, shape=shape, seed=seed)
    source = f"synthetic ({shape}, seed {seed})"
    if not trace.total_requests:  # as a trace file of only zeros is refused: the report read "0.00 x oracle"
        raise ValueError(f"the synthetic trace ({shape}, seed {seed}) drew no request: {models:,} models at --rps "
                         f"{rps:g} for --hours {hours:g}: nothing to replay; give a larger --rps or --hours")
    return trace, source


OUTPUTS: Final = ("report.json", "report.md", "timeline.png")
"""The files `simulate` writes in --out."""


def _check_out(out: Path) -> None:
    """Make `--out` and write a file there before the run, so that a directory that cannot be written is one
    line at the start, not a traceback after minutes of simulating."""
    try:
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(f"{out} is a file")
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as error:
        raise ValueError(f"--out {out}: cannot write there: {error.strerror or error}") from None
    for name in OUTPUTS:  # a directory (or a device) where a report file goes: open() fails only at the end
        path = out / name
        if path.exists() and not path.is_file():
            kind = "a directory" if path.is_dir() else "not a regular file"
            raise ValueError(f"--out {out}: cannot write {name} there: it is {kind}")


def _text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _write(out: Path, report: dict[str, Any], plot: Callable[[Path], None] | None) -> None:
    """The report's files, put in place together or not at all (outputs.py); a write that fails (a full disk)
    is one line naming the file, not a traceback."""
    from autoscaler.simulation.report import json_text, markdown

    try:
        write_together(out, {"report.json": lambda path: _text(path, json_text(report)),
                             "report.md": lambda path: _text(path, markdown(report)),
                             "timeline.png": plot})  # None: an earlier run's plot is removed
    except OSError as error:
        name = Path(error.filename).name.replace(".partial", "") if error.filename else "the report"
        raise ValueError(f"--out {out}: cannot write {name} there: {error.strerror or error}") from None


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Do the whole run and write the files; returns the report."""
    _synthetic_only(args)
    warnings: list[str] = []

    def say(message: str) -> None:
        """A warning about this machine, not the run (the memory it has free): on stderr only, so that reports of
        the same trace are the same wherever they ran, and a run that finished carries no "may be killed"."""
        print(f"simulate: warning: {message}", file=sys.stderr)

    def warn(message: str) -> None:
        """What the run does not take as given: said on stderr, kept in the report (which outlives the
        terminal), and the run goes on."""
        say(message)
        warnings.append(message)

    policy = _policy_and_warnings(args, warn)
    if not args.queue_untimed and args.scaleup_rpm != DEFAULT_SCALEUP_RPM:  # (ignored in silence, s58 review)
        warn(f"--scaleup-rpm {args.scaleup_rpm} does nothing in this run: the queue is timed, where ModelMesh copies "
             f"at 90% of a copy's measured bandwidth and the simulator ignores it; add --queue-untimed to replay a "
             f"runtime not annotated perModelConcurrencyLimit, or leave --scaleup-rpm out")
    behavior, hpa_spec, bounds = _behavior(args.hpa_behavior)
    if args.trace is None:  # as `synthetic` does, before numpy is imported: a refusal is said at once
        check_synthetic_size(*(_synthetic(args, name) for name in ("models", "hours", "rps")))
    else:  # a trace file's packing, text or header: said as reading it would, at once (trace_head.py)
        check_head(args.trace)
    # numpy and matplotlib come with the `simulate` extra; the adapter's own commands never import them. Imported
    # once the flags, the files beside the trace and the trace's header are read: a refused policy, HPA file,
    # size or header is said at once.
    from autoscaler.simulation.advice import HPA_WINDOW
    from autoscaler.simulation.cluster import ClusterShape
    from autoscaler.simulation.engine import oracle, simulate
    from autoscaler.simulation.report import build_report, plot_timeline, timeline_title
    from autoscaler.simulation.trace import buckets

    trace, source = _load_trace(args, say)
    for note in trace.notes:
        warn(note)
    shape = ClusterShape(pod_rps=args.pod_rps, cache_models=args.cache_models, load_time_s=args.load_time,
                         load_concurrency=args.load_concurrency, startup_delay_s=args.startup_delay,
                         slo_queue_s=args.slo_queue_ms / 1000.0,
                         min_churn_age_s=args.min_churn_age, queue_timed=not args.queue_untimed,
                         scaleup_rpm=args.scaleup_rpm)
    bucket_s, arrivals = buckets(trace, args.tick)
    if trace.interval_s < args.tick:
        warn(f"the trace's {trace.interval_s:g} s intervals are added up into --tick {args.tick:g} s steps, whose "
             f"requests are spread evenly over the step: bursts shorter than {args.tick:g} s queue less than they "
             f"did; --tick {trace.interval_s:g} replays each interval (slower)")
    best = oracle(trace, shape, policy.target_lru_age_s, bucket_s)
    first = sum(arrivals[0].rates) if arrivals else 0.0
    fixed, maximum, start = _size_run(args, policy, (hpa_spec, bounds), shape, best, first, warn)
    _check_out(args.out)  # after every check of what was given: a refused run leaves no directory behind
    results = _simulate_all(args, policy, behavior, shape, best, (fixed, maximum, start), bucket_s, arrivals,
                            trace.duration_s)
    if stuck := stuck_note([r.stuck_copies for r in results], trace.models, shape.pod_rps, shape.scaleup_rpm):
        warn(stuck)
    if crowded := crowded_note([r.crowded_pods for r in results], trace.models, shape.pod_rps, shape.scaleup_rpm):
        warn(crowded)
    rerun = Rerun(given_flags(args, _parser()), str(args.out.absolute()),
                  None if args.config is None else str(args.config.absolute()),
                  None if args.hpa_behavior is None else str(args.hpa_behavior.absolute()), args.min_replicas, maximum,
                  policy, behavior)

    def replay(setting: Mapping[str, Any], label: str) -> PolicyResult:
        """skew-aware alone, with the advised `setting` changed: the same cluster, bounds and start."""
        changed, hpa = policy, behavior
        if setting["setting"] == HPA_WINDOW:
            hpa = SHIPPED_BEHAVIOR
        else:
            value = int(setting["try"]) if setting["setting"] == "min_replicas" else setting["try"]
            changed = replace(policy, **{setting["setting"]: value})
        sim_policy, initial = _skew_aware(changed, hpa, args.min_replicas, maximum, start)
        return simulate(arrivals, bucket_s, args.tick, shape, sim_policy, initial,
                        None if args.quiet else ProgressBar(label), trace.duration_s)

    measure = None if args.advice == "off" or "mean-hpa" not in args.policies else replay
    report = build_report(_run_info(args, trace, source, shape, best, fixed, maximum, warnings, rerun), results,
                          measure)
    rates = trace.rate_per_interval()
    _write(args.out, report, None if args.no_plot else lambda path: plot_timeline(
        path, trace.interval_s, rates.tolist(), results, timeline_title(report)))
    return report


def _policy_and_warnings(args: argparse.Namespace, warn: Callable[[str], None]) -> RuntimePolicy:
    """The simulated runtime's policy (--config's `defaults:`, else the built-in one), warning of what the run
    leaves out of what was given: a policy file's `runtimes:`, flags for skew-aware where --policies leaves it
    out, and a --tick longer than ModelMesh's rate check."""
    policy = RuntimePolicy()
    if args.config is not None:
        book = load_policy_book(args.config)
        policy = book.defaults
        if book.runtimes:
            warn(f"ignoring the {len(book.runtimes)} runtimes: entr{'y' if len(book.runtimes) == 1 else 'ies'} "
                  f"of {args.config}: the simulated runtime takes its defaults: (copy an entry's keys there)")
    for flag in _skew_aware_only(args, policy):
        warn(f"{flag} does nothing in this run: {SKEW_AWARE_ONLY[flag.split()[0]]}, which --policies "
             f"{','.join(args.policies)} leaves out; add skew-aware to --policies, or leave {flag.split()[0]} out")
    if args.tick > RATE_CHECK_S:
        warn(f"--tick {args.tick:g} is longer than ModelMesh's {RATE_CHECK_S:g} s rate check (and the HPA's "
              f"{SYNC_PERIOD_S:g} s sync): both then run once a tick, which delays copies and scaling; use "
              f"{RATE_CHECK_S:g} or less")
    return policy


def _size_run(args: argparse.Namespace, policy: RuntimePolicy, hpa: tuple[dict[str, Any], tuple[str, str]],
              shape: ClusterShape, best: Oracle, first: float, warn: Callable[[str], None]) -> tuple[int, int, int]:
    """`sizing`'s (fixed replicas, maxReplicas, starting replicas) for this run, refusing a run past what
    `simulate` runs (`RunSize.check`) and bounds that contradict each other, and warning where the given bounds
    hold every policy (the table would show the cap, not the policies) or differ from --hpa-behavior's HPA."""
    fixed, maximum, start = sizing(best.peak_rps, first, shape.pod_rps, args.min_replicas, args.max_replicas,
                                   peak_pods=best.peak_pods)
    size = RunSize(fixed, maximum, best.peak_rps, shape.pod_rps, args.min_replicas, args.max_replicas is not None,
                   best.peak_pods, shape.cache_models, None if args.trace is not None else _synthetic(args, "rps"))
    size.check(args.policies)
    if slow := size.slow():
        warn(slow)
    if args.max_replicas is not None:  # short of pods for the models in use, or else for the requests
        default = sizing(best.peak_rps, first, shape.pod_rps, args.min_replicas, None, peak_pods=best.peak_pods)[1]
        short = (short_of_cache(maximum, shape.cache_models, best.peak_models, policy.target_lru_age_s)
                 or short_of_requests(maximum, fixed, best.peak_rps, shape.pod_rps, default))
        if short:
            warn(short)
    if args.hpa_behavior is not None and (other := _other_bounds(args.hpa_behavior, hpa[0], args.min_replicas,
                                                                   maximum, hpa[1])):
        warn(other)
    if args.config is not None and policy.max_replicas is not None and policy.max_replicas < args.min_replicas:
        raise ValueError(f"{args.config}: defaults: max_replicas {policy.max_replicas} is below --min-replicas "
                         f"{args.min_replicas} (the HPA's minReplicas): raise it, or give --min-replicas "
                         f"{policy.max_replicas}")
    if args.config is not None and policy.min_replicas is not None and policy.min_replicas > maximum:
        warn(f"{args.config}: defaults: min_replicas {policy.min_replicas} is above this run's maxReplicas "
             f"{maximum}: the HPA holds skew-aware at {maximum} (give --max-replicas {policy.min_replicas} or more "
             "to simulate the policy's own)")
    return fixed, maximum, start


def _simulate_all(args: argparse.Namespace, policy: RuntimePolicy, behavior: Behavior | None, shape: ClusterShape,
                  best: Oracle, sized: tuple[int, int, int], bucket_s: float, arrivals: Buckets,
                  duration_s: float) -> list[PolicyResult]:
    """Replay the trace under each policy of --policies, in its order, each from its starting replicas
    (`sized`: `sizing`'s fixed replicas, maxReplicas and the autoscaled policies' start)."""
    from autoscaler.simulation.engine import simulate
    from autoscaler.simulation.policies import FixedPolicy, MeanHpaPolicy, SimPolicy, max_bound

    fixed, maximum, start = sized
    makers: dict[str, tuple[SimPolicy, int]] = {
        "fixed": (FixedPolicy(fixed, why=fixed_why(fixed, shape.cache_models, best.peak_models)), fixed),
        "fixed-max": (max_bound(maximum), maximum),
        "mean-hpa": (MeanHpaPolicy(args.min_replicas, maximum), start),
        "skew-aware": _skew_aware(policy, behavior, args.min_replicas, maximum, start),
    }
    results: list[PolicyResult] = []
    for name in args.policies:
        sim_policy, initial = makers[name]
        bar = None if args.quiet else ProgressBar(name)
        started = time.perf_counter()
        result = simulate(arrivals, bucket_s, args.tick, shape, sim_policy, initial, bar, duration_s)
        result.wall_s = time.perf_counter() - started
        results.append(result)
    return results


def _skew_aware(policy: RuntimePolicy, behavior: Behavior | None, min_replicas: int, maximum: int,
                start: int) -> tuple[SkewAwarePolicy, int]:
    """skew-aware under `policy` and the HPA's `behavior` and bounds, and the replicas it starts from."""
    from autoscaler.simulation.policies import SkewAwarePolicy

    # The adapter takes bounds it is not given from the HPA (docs/design.md); here the HPA is the simulated one.
    ours = replace(policy, min_replicas=max(policy.min_replicas or 1, min_replicas),
                   max_replicas=policy.max_replicas or maximum)
    skew_aware = SkewAwarePolicy(ours, min_replicas, maximum, behavior)
    low, high = skew_aware.bounds  # the policy file's bounds too: it starts within what it can run
    return skew_aware, min(high, max(low, start))


def _parser() -> argparse.ArgumentParser:
    """A parser of `simulate`'s flags alone, for their defaults: a flag at its default is left out of the advice's
    commands (`rerun.given_flags`)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_simulate_arguments(parser)
    return parser


def _run_info(args: argparse.Namespace, trace: Trace, source: str, shape: ClusterShape, best: Oracle, fixed: int,
              maximum: int, warnings: list[str], rerun: Rerun) -> RunInfo:
    """What the report says of the run besides the policies' results: the trace, the cluster, the oracle and
    the warnings."""
    from autoscaler.simulation.report import RunInfo

    return RunInfo(
        trace={"source": source, "models": len(trace.models), "interval_s": trace.interval_s,
               "hours": figure(trace.duration_s / 3600.0), "requests": round(trace.total_requests)},
        cluster={"pod_rps": shape.pod_rps, "cache_models": shape.cache_models, "load_time_s": shape.load_time_s,
                 "load_concurrency": shape.load_concurrency, "startup_delay_s": shape.startup_delay_s,
                 "min_replicas": args.min_replicas,
                 "max_replicas": maximum, "fixed_replicas": fixed, "peak_pods": best.peak_pods,
                 "peak_models": best.peak_models, "tick_s": args.tick,
                 "slo_queue_ms": args.slo_queue_ms, "min_churn_age_s": shape.min_churn_age_s,
                 "queue_timed": shape.queue_timed, "scaleup_rpm": shape.scaleup_rpm},
        oracle=best,
        warnings=warnings,
        trace_start_s=trace.start_s,
        rerun=rerun,
    )


def _missing_directories(out: Path) -> list[Path]:
    """`out` and each of its parents that does not exist yet, deepest first: the directories `_check_out` makes,
    and so this run's to remove if it ends before its report is in place."""
    missing = []
    path = out.absolute()
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def _remove_made(made: list[Path]) -> None:
    """Remove the directories this run made (`_missing_directories`), deepest first, each only if empty: left,
    `--out runs/today/report` stopped early left runs/today/, read as a run that wrote nothing. One that holds
    anything (a whole report put in place) stays, and so do its parents."""
    for path in made:
        try:
            path.rmdir()
        except OSError:  # not empty, or never made
            return


def _stop_on_signals(out: Path, made: list[Path]) -> None:
    """Ctrl-C and SIGTERM (`timeout`, a cancelled CI job, a deleted pod) end the run at once with one line and
    the signal's status, and remove the directories this run made for `out` (`_remove_made`). A report being
    written is discarded (outputs.py: its files are put in place together or not at all). A directory that was
    there before is the user's and stays.

    Ended with `os._exit` from the handler, not an exception: simulating is plain computation with nothing to
    close, and an exception raised inside one of an import's callbacks is printed and lost (see `main`)."""

    def stop(signum: int, frame: object) -> None:
        discard(out, OUTPUTS)  # the files of a report being written: none is put in place
        _remove_made(made)
        sys.stderr.write("\ninterrupted.\n" if signum == signal.SIGINT else "\nterminated.\n")
        sys.stderr.flush()
        os._exit(128 + signum)

    with contextlib.suppress(ValueError):  # not the main thread (a test calling run_simulate): nothing to take over
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)


def run_simulate(args: argparse.Namespace) -> int:
    made = _missing_directories(args.out)
    _stop_on_signals(args.out, made)
    try:
        report = run(args)
    except ModuleNotFoundError as error:
        if error.name not in ("numpy", "matplotlib"):
            raise
        print(f"{ERROR}needs {error.name}: pip install 'modelmesh-autoscaler[simulate]' (in a checkout: "
              ".venv/bin/pip install -e '.[simulate]')", file=sys.stderr)
        return 2
    except (ConfigError, ValueError) as error:  # TraceError is a ValueError
        _remove_made(made)  # a failure after `_check_out` (a write that failed): no empty directories left
        ProgressBar.end_line()  # a bar left short of its end (reading): the error on a line of its own
        print(f"{ERROR}{error}", file=sys.stderr)
        return 2
    except MemoryError:  # under `ulimit -v` (the kernel's OOM killer says nothing: `MemoryWatch` warns before)
        _remove_made(made)
        ProgressBar.end_line()
        print(f"{ERROR}out of memory ({LIMITS}): {_out_of_memory_advice(args)}", file=sys.stderr)
        return 1
    try:
        _print_summary(args, report)
    except BrokenPipeError:
        return _closed_pipe()
    return 0


def _out_of_memory_advice(args: argparse.Namespace) -> str:
    """What needed the memory and what to do: a trace file is made coarser or shorter, a synthetic one smaller."""
    if args.trace is not None:
        return f"the trace needs more to simulate; {ADVICE}"
    models, hours = _synthetic(args, "models"), _synthetic(args, "hours")
    return f"the synthetic trace of {models:,} models over {hours:g} hours needs more to simulate; {SYNTHETIC_ADVICE}"


def _print_summary(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """The table and notes on stdout, flushed here so that a reader that has gone shows as BrokenPipeError."""
    from autoscaler.simulation.advice import advice_text
    from autoscaler.simulation.report import BASELINE, bound_text, cache_text, goal_text, table
    from autoscaler.simulation.stuck_baseline import stuck_text

    print(table(report))
    if goal := goal_text(report):
        print("\n" + goal)
    if changes := advice_text(report):
        print("\n" + changes)
    if stuck := stuck_text(report, BASELINE):
        print("\n" + stuck)
    if cache := cache_text(report):
        print("\n" + cache)
    if ceiling := goal_ceiling_text(report, BASELINE):
        print("\n" + ceiling)
    if "bound" in report:
        print("\n" + bound_text(report))
    print(f"\nreport: {args.out / 'report.md'}, {args.out / 'report.json'}"
          + ("" if args.no_plot else f", {args.out / 'timeline.png'}"))
    sys.stdout.flush()


def _closed_pipe() -> int:
    """A reader that stopped (`simulate ... | head -1`): no word and 128 + SIGPIPE, as a tool killed by SIGPIPE
    ends (`yes | head`). It was a BrokenPipeError traceback and status 1 although the report had been written.
    stdout is pointed at devnull (Python's own recipe, docs "Note on SIGPIPE") so that the flush at exit does
    not fail again and print "Exception ignored"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE
