"""`modelmesh-autoscaler simulate`: replay a trace under each policy and write the report (docs/design.md)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from autoscaler.cli import PROG
from autoscaler.policies.config import ConfigError
from autoscaler.policies.config_file import load_policy_book
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.simulation.figures import figure
from autoscaler.simulation.goal_ceiling import goal_ceiling_text
from autoscaler.simulation.hpa import SYNC_PERIOD_S
from autoscaler.simulation.hpa_spec import Behavior
from autoscaler.simulation.hpa_windows import WINDOWS, with_window
from autoscaler.simulation.memory_room import ADVICE, LIMITS, SYNTHETIC_ADVICE
from autoscaler.simulation.progress_bar import ProgressBar
from autoscaler.simulation.rate_check import DEFAULT_SCALEUP_RPM, RATE_CHECK_S
from autoscaler.simulation.rerun import Rerun, given_flags
from autoscaler.simulation.run_size import RunSize, fixed_why, short_of_cache, short_of_requests, sizing
from autoscaler.simulation.simulate_args import defaults_parser
from autoscaler.simulation.simulate_hpa_file import other_bounds, read_hpa_file
from autoscaler.simulation.simulate_out import (
    check_out,
    closed_pipe,
    missing_directories,
    remove_made,
    stop_on_signals,
    write_report,
)
from autoscaler.simulation.standard_input import input_name
from autoscaler.simulation.stuck_copies import crowded_note
from autoscaler.simulation.stuck_copies import note as stuck_note
from autoscaler.simulation.synthetic_size import check_synthetic_size
from autoscaler.simulation.trace_head import check_head

if TYPE_CHECKING:
    from autoscaler.simulation.cluster import ClusterShape
    from autoscaler.simulation.engine import Oracle, PolicyResult
    from autoscaler.simulation.policies import SkewAwarePolicy
    from autoscaler.simulation.report import RunInfo
    from autoscaler.simulation.trace import Trace
    from autoscaler.simulation.trace_buckets import Buckets

ERROR: Final = f"{PROG} simulate: error: "
"""How a run's error starts: as argparse starts the errors of the flags (`autoscaler.cli`), so that every error of
`simulate` reads the same (its own ones said `simulate: ...`)."""


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
    from autoscaler.simulation.synthetic_trace import synthetic
    from autoscaler.simulation.trace import read_csv

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
    behavior, hpa_spec, bounds = read_hpa_file(args.hpa_behavior)
    if args.trace is None:  # as `synthetic` does, before numpy is imported: a refusal is said at once
        check_synthetic_size(*(_synthetic(args, name) for name in ("models", "hours", "rps")))
    else:  # a trace file's packing, text or header: said as reading it would, at once (trace_head.py)
        check_head(args.trace)
    # numpy and matplotlib come with the `simulate` extra; the adapter's own commands never import them. Imported
    # once the flags, the files beside the trace and the trace's header are read: a refused policy, HPA file,
    # size or header is said at once.
    from autoscaler.simulation.cluster import ClusterShape
    from autoscaler.simulation.engine import oracle, simulate
    from autoscaler.simulation.report import build_report
    from autoscaler.simulation.report_text import timeline_title
    from autoscaler.simulation.timeline_plot import plot_timeline
    from autoscaler.simulation.trace_buckets import buckets

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
    check_out(args.out)  # after every check of what was given: a refused run leaves no directory behind
    results = _simulate_all(args, policy, behavior, shape, best, (fixed, maximum, start), bucket_s, arrivals,
                            trace.duration_s)
    if stuck := stuck_note([r.stuck_copies for r in results], trace.models, shape.pod_rps, shape.scaleup_rpm):
        warn(stuck)
    if crowded := crowded_note([r.crowded_pods for r in results], trace.models, shape.pod_rps, shape.scaleup_rpm):
        warn(crowded)
    rerun = Rerun(given_flags(args, defaults_parser()), str(args.out.absolute()),
                  None if args.config is None else str(args.config.absolute()),
                  None if args.hpa_behavior is None else str(args.hpa_behavior.absolute()), args.min_replicas, maximum,
                  policy, behavior)

    def replay(setting: Mapping[str, Any], label: str) -> PolicyResult:
        """skew-aware alone, with the advised `setting` changed: the same cluster, bounds and start."""
        changed, hpa = policy, behavior
        if setting["setting"] in WINDOWS:  # that one field of the HPA's behavior, the rest as given
            hpa = with_window(behavior, setting["setting"], int(setting["try"]))
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
    write_report(args.out, report, None if args.no_plot else lambda path: plot_timeline(
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
    if args.hpa_behavior is not None and (other := other_bounds(args.hpa_behavior, hpa[0], args.min_replicas,
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



def run_simulate(args: argparse.Namespace) -> int:
    made = missing_directories(args.out)
    stop_on_signals(args.out, made)
    try:
        report = run(args)
    except ModuleNotFoundError as error:
        if error.name not in ("numpy", "matplotlib"):
            raise
        print(f"{ERROR}needs {error.name}: pip install 'modelmesh-autoscaler[simulate]' (in a checkout: "
              ".venv/bin/pip install -e '.[simulate]')", file=sys.stderr)
        return 2
    except (ConfigError, ValueError) as error:  # TraceError is a ValueError
        remove_made(made)  # a failure after `check_out` (a write that failed): no empty directories left
        ProgressBar.end_line()  # a bar left short of its end (reading): the error on a line of its own
        print(f"{ERROR}{error}", file=sys.stderr)
        return 2
    except MemoryError:  # under `ulimit -v` (the kernel's OOM killer says nothing: `MemoryWatch` warns before)
        remove_made(made)
        ProgressBar.end_line()
        print(f"{ERROR}out of memory ({LIMITS}): {_out_of_memory_advice(args)}", file=sys.stderr)
        return 1
    try:
        _print_summary(args, report)
    except BrokenPipeError:
        return closed_pipe()
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
    from autoscaler.simulation.report import BASELINE
    from autoscaler.simulation.report_text import bound_text, cache_text, goal_text, table
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
