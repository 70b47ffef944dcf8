"""The demo's flags, apart from the demo: every command's flags are read to parse any one command line, and the
demo itself (aiohttp, the fleet, the HPA model) would add a third of a second to `serve` and `simulate`
starting, and to every `--help`."""

from __future__ import annotations

import argparse
from typing import Final

from exporter.flag_values import duration_seconds, seconds_within, whole_number_within

DEMO_MIN_INTERVAL_S: Final = 1.0
"""The shortest `--interval`: the demo's adapter refreshes once a second (`fleet.DemoFleet.adapter_arguments`), so a
table more often repeats the last, and each asks every exporter and the adapter; `--interval 1e-9` was taken, and
printed 363 lines in 20 s."""

DEMO_MAX_INTERVAL_S: Final = 600.0
"""The longest `--interval`: `1e300` was taken, and the demo ran its whole duration without a table."""

DEMO_MAX_PODS: Final = 32
"""The most pods `demo` runs: each is a fake ModelMesh and a real exporter process on this machine (about 40 MB
and some CPU each); `--pods 100000` began starting them one by one on a 2-core machine, without a word."""


DEMO_DURATION_RANGE_S: Final = (1.0, 86_400.0)
"""The scenario lengths taken: `--duration 1e300` was taken and ran until Ctrl-C; a day is already far more than
the scenario shows, and below a second not one of the adapter's refreshes happens."""

demo_duration = seconds_within(*DEMO_DURATION_RANGE_S)
"""Seconds the scenario runs, within `DEMO_DURATION_RANGE_S`."""

DEMO_START_TIMEOUT_RANGE_S: Final = (1.0, 3600.0)
"""The waits for the adapter's first value taken: `--start-timeout 1e300` waited for ever on a pod that never
started; an hour is far past the slowest machine's start (a minute is the default), and below a second the
adapter's first refresh cannot come."""

demo_start_timeout = seconds_within(*DEMO_START_TIMEOUT_RANGE_S)
"""Seconds to wait for the adapter's first value and for pods still starting, within `DEMO_START_TIMEOUT_RANGE_S`."""


def demo_pods(value: str) -> int:
    """A demo's pod count: 1 to `DEMO_MAX_PODS`."""
    return whole_number_within(value, 1, DEMO_MAX_PODS, f"1 to {DEMO_MAX_PODS} (each is an exporter process here)")


def demo_interval(value: str) -> float:
    """Seconds between the demo's tables, `DEMO_MIN_INTERVAL_S` to `DEMO_MAX_INTERVAL_S`, the range said whatever
    side the value is on (0 was told "must be greater than 0", 0.5 "must be at least 1 s")."""
    interval = duration_seconds(value)  # `nan` and `inf` refused as everywhere
    if not DEMO_MIN_INTERVAL_S <= interval <= DEMO_MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(
            f"must be {DEMO_MIN_INTERVAL_S:g} to {DEMO_MAX_INTERVAL_S:g} seconds, got {value!r} (the demo's adapter "
            f"refreshes once a second: a table more often repeats the last; one less often than every ten minutes "
            f"shows none of a run)")
    return interval


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's flags, checked as `serve` checks its own (`autoscaler.serve_args`): a value it cannot run with
    (`--pods 0`, `--duration nan`) is one line naming the flag and the value, before anything starts."""
    parser.add_argument("--duration", type=demo_duration, default=60.0, metavar="SECONDS",
                        help=f"seconds the scenario runs, {DEMO_DURATION_RANGE_S[0]:g} to "
                             f"{DEMO_DURATION_RANGE_S[1]:g}, from the adapter's first served value (longer where the "
                             "traffic drop waits for pods still starting); Ctrl-C stops it earlier (default 60)")
    parser.add_argument("--pods", type=demo_pods, default=4, metavar="N",
                        help=f"fake ModelMesh pods at the start, 1 to {DEMO_MAX_PODS} (default 4)")
    parser.add_argument("--max-pods", type=demo_pods, default=None, metavar="N",
                        help=f"the demo HPA's maxReplicas, at least --pods and at most {DEMO_MAX_PODS} (default 2 x "
                             f"--pods, at most {DEMO_MAX_PODS})")
    parser.add_argument("--start-timeout", type=demo_start_timeout, default=60.0, metavar="SECONDS",
                        help=f"{DEMO_START_TIMEOUT_RANGE_S[0]:g} to {DEMO_START_TIMEOUT_RANGE_S[1]:g} seconds: how "
                             "long the demo waits for the adapter's first value before the scenario starts, "
                             "and the traffic drop for pods still starting (default 60)")
    parser.add_argument("--interval", type=demo_interval, default=3.0, metavar="SECONDS",
                        help=f"seconds between printed tables, {DEMO_MIN_INTERVAL_S:g} to {DEMO_MAX_INTERVAL_S:g} "
                             "(default 3)")
