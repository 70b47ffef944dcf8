"""`modelmesh-exporter`: run the per-pod sidecar (flags and `EXPORTER_*` variables: `--help`)."""

from __future__ import annotations

import sys  # built in: the only import before main's Ctrl-C handling


def main(argv: list[str] | None = None) -> None:
    """Run the sidecar. Its modules (aiohttp, prometheus_client, pynvml) are imported here, inside the Ctrl-C
    handling: Ctrl-C while they load (about a second on a small machine) is one line and status 130, not a
    traceback of whatever module was loading; once serving, aiohttp stops on it cleanly."""
    try:
        from exporter.startup import serve

        serve(argv)
    except KeyboardInterrupt:
        print("\ninterrupted.", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
