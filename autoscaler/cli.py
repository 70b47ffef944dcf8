"""`modelmesh-autoscaler`: the adapter (`serve`) and the local demo (`demo`)."""

from __future__ import annotations

import argparse
import logging
import sys

from autoscaler import __version__


def build_parser() -> argparse.ArgumentParser:
    from autoscaler.demo.run import add_demo_arguments
    from autoscaler.settings import add_serve_arguments

    parser = argparse.ArgumentParser(
        prog="modelmesh-autoscaler",
        description="Skew-aware external metrics for scaling KServe ModelMesh runtimes with the Kubernetes HPA.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve", help="run the external.metrics.k8s.io API server",
        description="Serve modelmesh_desired_replicas, modelmesh_gpu_busy, modelmesh_request_load and "
                    "modelmesh_cache_pressure per runtime through external.metrics.k8s.io/v1beta1 over HTTPS.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_serve_arguments(serve)
    demo = commands.add_parser(
        "demo", help="run the whole data path on this machine: fake ModelMesh pods, exporters, the adapter",
        description="Start fake ModelMesh pods with uneven, changing load, one real exporter per pod and "
                    "the adapter, and print what the adapter serves every few seconds. No cluster needed.",
    )
    add_demo_arguments(demo)
    from autoscaler.simulation.cli import add_simulate_arguments

    simulate = commands.add_parser(
        "simulate", help="replay a request trace through the decision code and an HPA; compare policies",
        description="Replay a per-model request trace (or a synthetic one) on a simulated ModelMesh runtime "
                    "under fixed replicas, an HPA on mean utilization, and the skew-aware adapter; write "
                    "report.json, report.md and timeline.png.",
    )
    add_simulate_arguments(simulate)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(args, "log_level", "INFO"), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command == "serve":
        from autoscaler.server import StartupError, serve
        from autoscaler.settings import settings_from_args

        try:
            serve(settings_from_args(args))
        except (StartupError, OSError, ValueError) as error:
            logging.getLogger("autoscaler").error("cannot start: %s", error)
            sys.exit(2)
    elif args.command == "demo":
        from autoscaler.demo.run import run_demo

        sys.exit(run_demo(args))
    elif args.command == "simulate":
        from autoscaler.simulation.cli import run_simulate

        sys.exit(run_simulate(args))


if __name__ == "__main__":
    main()
