"""`simulate`'s flags: their argparse definitions, and the validators of the values argparse cannot check alone
(a choice in any letter case, a list of policies named once, a directory named)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

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
from autoscaler.simulation.rate_check import DEFAULT_SCALEUP_RPM, SCALEUP_RPM_RANGE
from autoscaler.simulation.shapes import SHAPES
from autoscaler.simulation.standard_input import argument_path
from autoscaler.simulation.synthetic_size import (
    MAX_MODEL_HOURS,
    MAX_SYNTHETIC_HOURS,
    MAX_SYNTHETIC_MODELS,
    MAX_SYNTHETIC_RPS,
)
from exporter.env_flags import Switch
from exporter.flag_values import count, positive, whole_number, whole_number_within

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


def defaults_parser() -> argparse.ArgumentParser:
    """A parser of `simulate`'s flags alone, for their defaults: a flag at its default is left out of the advice's
    commands (`rerun.given_flags`)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_simulate_arguments(parser)
    return parser
