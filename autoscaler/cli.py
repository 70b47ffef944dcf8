"""`modelmesh-autoscaler`: the adapter (`serve`), the local demo (`demo`) and the simulator (`simulate`)."""

from __future__ import annotations

import sys  # built in: with the package's own __init__, all that loads before main's Ctrl-C handling

TYPE_CHECKING = False
"""True for mypy alone (it reads the name so), where `from typing import TYPE_CHECKING` loaded `typing`
before `main`: a Ctrl-C during that import was a traceback (tests/test_cli_ctrl_c_window.py)."""

if TYPE_CHECKING:
    import argparse
    from typing import NoReturn

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

PROG = "modelmesh-autoscaler"
"""The command's name, as its messages start: `modelmesh-autoscaler simulate: error: ...`, argparse's form."""

INHERITED_MULTIPROCESS_VARIABLES = ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir")
"""prometheus_client's switch to multiprocess values (the lower-case spelling is its deprecated one), read when
it is imported; `autoscaler.api.selfmetrics_split.MULTIPROCESS_DIRECTORY` is the one the adapter sets itself."""


COMMANDS = ("serve", "demo", "simulate")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only`, the flags of that command alone (the others still listed, by name
    and help): a run parses one command's flags, and building the others' imported their modules (the
    simulator's, for every `serve`) at each start."""
    import argparse

    from exporter.flag_values import SECONDS_FORMS
    from exporter.version_flag import VersionFlag

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Skew-aware external metrics for scaling KServe ModelMesh runtimes with the Kubernetes HPA.",
    )
    parser.add_argument("--version", action=VersionFlag)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_command_parser_class())
    serve = commands.add_parser("serve", help="run the external.metrics.k8s.io API server")
    if only in (None, "serve"):
        from autoscaler.serve_args import SERVE_DESCRIPTION, add_serve_arguments

        serve.description = SERVE_DESCRIPTION
        add_serve_arguments(serve)
    demo = commands.add_parser(
        "demo", help="run the whole data path on this machine: fake ModelMesh pods, exporters, the adapter",
        description="Start fake ModelMesh pods with uneven, changing load, one real exporter per pod and "
                    "the adapter, and print what the adapter serves every few seconds. No cluster needed. "
                    f"SECONDS is {SECONDS_FORMS}.",
    )
    if only in (None, "demo"):
        from autoscaler.demo.arguments import add_demo_arguments

        add_demo_arguments(demo)
    simulate = commands.add_parser(
        "simulate", help="replay a request trace through the decision code and an HPA; compare policies",
        description="Replay a per-model request trace (or a synthetic one) on a simulated ModelMesh runtime "
                    "under fixed replicas (for the peak, and maxReplicas all day: the bound), an HPA on mean "
                    "utilization, and the skew-aware adapter; write report.json, report.md and timeline.png. "
                    f"SECONDS is {SECONDS_FORMS}; a switch's off form (--plot for --no-plot) turns it off.",
    )
    if only in (None, "simulate"):
        from autoscaler.simulation.simulate_args import add_simulate_arguments

        add_simulate_arguments(simulate)
    return parser


def _command_named(argv: list[str]) -> str | None:
    """The command a command line runs: its first word that is not a flag (the top level's flags, --version and
    --help, take no value), or None where that is no command (argparse then says so, from the whole parser)."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in COMMANDS else None


def _command_parser_class() -> type[argparse.ArgumentParser]:
    """A command's parser: a value a flag refuses is one line naming the flag and the value, and exit status 2,
    like a bad `AUTOSCALER_*` variable (argparse's usage before it, 50 lines for `serve`, buried the line that
    matters at the top of a pod's log). A flag it does not know still shows the usage, to find the right one."""
    import argparse

    class CommandParser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            if message.startswith("argument "):
                self.exit(2, f"{self.prog}: error: {message}\n")
            super().error(message)

    return CommandParser


def command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of the command `name` (argparse keeps the commands' parsers in its subparsers action)."""
    import argparse

    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = commands.choices[name]
    return found


def main(argv: list[str] | None = None) -> None:
    """Run one command. Ctrl-C before the command has its own handler in place (while Python imports the
    command's modules, about a second on a small machine) ends it with one line and status 130, as the
    command's own handler does, instead of a traceback of whatever module was being imported."""
    previous = None
    try:
        import contextlib
        import signal  # (its enums take a moment to make: inside the handling below)

        with contextlib.suppress(ValueError):  # not the main thread (a test calling main): nothing to take over
            previous = signal.signal(signal.SIGINT, _stop_while_starting)
        run_command(argv)
    except KeyboardInterrupt:
        print("\ninterrupted.", file=sys.stderr)
        sys.exit(130)
    finally:
        # not where the command ignores Ctrl-C now (`serve` once stopped: `StopSignals.hold`)
        if previous is not None and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous)


def _stop_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C before the command took Ctrl-C over: end at once, status 130, one line. Raised as Python's
    KeyboardInterrupt, a Ctrl-C that came while an import ran one of its weak-reference callbacks
    (`_get_module_lock`'s) was printed as "Exception ignored in ..." with a traceback and then lost: the command
    went on (a CI run of the demo's Ctrl-C test failed so). Each command takes Ctrl-C over before it starts
    anything to stop or remove (`serve`'s refresh process, the demo's processes and directory, the `--out`
    directory `simulate` makes)."""
    import os  # built in

    sys.stderr.write("\ninterrupted.\n")
    sys.stderr.flush()
    os._exit(130)


def _drop_inherited_multiprocess_directory() -> list[str]:
    """Remove prometheus_client's multiprocess switch from the environment before anything imports
    prometheus_client, for this process and the serving workers it starts; the names removed.

    Inherited (an image's or a shell's setting), it put every process's counters in files in that directory, and
    one worker's `/metrics` summed every file there: a restarted adapter counted the requests of its earlier runs
    and of any other process writing there, and each run left its files behind. Only several workers share
    their counts, in a fresh directory of their own (`autoscaler.workers`)."""
    import os  # built in

    return [name for name in INHERITED_MULTIPROCESS_VARIABLES if os.environ.pop(name, None) is not None]


def _refuse_start(error: Exception, log_level: str) -> NoReturn:
    """`serve` could not start: one line naming the fix, exit status 2; the traceback only for whoever asked for
    DEBUG. Called while `error` is being handled, so that the traceback is its."""
    import logging

    logging.getLogger("autoscaler").error("cannot start: %s", error, exc_info=log_level == "DEBUG")
    sys.exit(2)


def run_command(argv: list[str] | None) -> None:
    import logging  # here, not at the top: inside main's Ctrl-C handling

    parser = build_parser(only=_command_named(sys.argv[1:] if argv is None else argv))
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported by the command, with its usage: `parse_args` would print the top level's
        command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "serve":
        dropped = _drop_inherited_multiprocess_directory()
        from autoscaler.serve_args import SettingsError, settings_from_args, unknown_variables

        try:
            settings = settings_from_args(args)
        except SettingsError as error:
            # As argparse reports a bad flag: one line, exit status 2 (no usage: the flag was not the problem).
            print(f"modelmesh-autoscaler serve: error: {error}", file=sys.stderr)
            sys.exit(2)
        logging.basicConfig(level=settings.log_level, format=LOG_FORMAT)
        from autoscaler.unused_settings import unused_settings

        for warning in [*unknown_variables(), *unused_settings(settings)]:
            logging.getLogger("autoscaler").warning("%s", warning)
        for name in dropped:
            logging.getLogger("autoscaler").warning(
                "%s is set: ignored (the adapter counts its own requests, in a private directory where several "
                "--workers share them)", name)
        from autoscaler.preflight import PreflightError, check_startup
        from exporter.stack_dumps import StackDumps

        StackDumps("adapter").install()  # SIGQUIT: the stacks, also of a start that hangs (serve_* name the role)
        try:
            # Before any worker, bind or "serving" line, and before the serving side's libraries (aiohttp,
            # cryptography, the server's modules: a third of a second) load: a mistake is refused without them.
            check_startup(settings)
        except (PreflightError, OSError, ValueError) as error:
            _refuse_start(error, settings.log_level)
        from autoscaler.server import StartupError, serve

        try:
            serve(settings)
        except (StartupError, PreflightError, OSError, ValueError) as error:
            _refuse_start(error, settings.log_level)
    elif args.command == "demo":
        from autoscaler.demo.command import run_demo

        logging.basicConfig(level="INFO", format=LOG_FORMAT)
        sys.exit(run_demo(args))
    elif args.command == "simulate":
        from autoscaler.simulation.cli import run_simulate

        sys.exit(run_simulate(args))


if __name__ == "__main__":
    main()
