"""`modelmesh-exporter`: run the per-pod sidecar (flags and `EXPORTER_*` variables: `--help`)."""

from __future__ import annotations

import sys  # built in: the only import before main's Ctrl-C handling


def main(argv: list[str] | None = None) -> None:
    """Run the sidecar. Its modules (aiohttp, prometheus_client, pynvml) are imported here, inside the Ctrl-C
    handling: Ctrl-C while they load (about a second on a small machine) is one line and status 130, not a
    traceback of whatever module was loading; once serving, aiohttp stops on it cleanly (its own handler
    replaces `_stop_while_starting`)."""
    try:
        import signal  # (its enums take a moment to make: inside the handling below)

        signal.signal(signal.SIGINT, _stop_while_starting)
        from exporter.startup import serve

        serve(argv)
    except KeyboardInterrupt:
        print("\ninterrupted.", file=sys.stderr)
        sys.exit(130)


def _stop_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C before aiohttp serves: end at once, status 130, one line. Raised as Python's KeyboardInterrupt, a
    Ctrl-C that came while an import ran one of its weak-reference callbacks (`_get_module_lock`'s) was printed
    as "Exception ignored in ..." with a traceback and then lost: the exporter went on starting and served.
    Nothing is open yet that needs closing (a bound socket closes with the process)."""
    import os  # built in

    sys.stderr.write("\ninterrupted.\n")
    sys.stderr.flush()
    os._exit(130)


if __name__ == "__main__":
    main()
