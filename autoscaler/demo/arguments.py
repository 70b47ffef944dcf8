"""The demo's flags, apart from the demo: every command's flags are read to parse any one command line, and the
demo itself (aiohttp, the fleet, the HPA model) would add a third of a second to `serve` and `simulate`
starting, and to every `--help`."""

from __future__ import annotations

import argparse

from autoscaler.settings import DEMO_MAX_PODS, demo_pods
from exporter.settings import seconds


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's flags, checked as `serve` checks its own (`autoscaler.settings`): a value it cannot run with
    (`--pods 0`, `--duration nan`) is one line naming the flag and the value, before anything starts."""
    parser.add_argument("--duration", type=seconds, default=60.0, metavar="SECONDS",
                        help="seconds to run; Ctrl-C stops it earlier (default 60)")
    parser.add_argument("--pods", type=demo_pods, default=4, metavar="N",
                        help=f"fake ModelMesh pods at the start, 1 to {DEMO_MAX_PODS} (default 4)")
    parser.add_argument("--max-pods", type=demo_pods, default=None, metavar="N",
                        help=f"the demo HPA's maxReplicas, at least --pods and at most {DEMO_MAX_PODS} (default 2 x "
                             f"--pods, at most {DEMO_MAX_PODS})")
    parser.add_argument("--interval", type=seconds, default=3.0, metavar="SECONDS",
                        help="seconds between printed tables (default 3)")
