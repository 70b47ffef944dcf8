"""Both programs' `--version`, its line made only when asked: reading the version (importlib.metadata, git's
files: `exporter.build_info`) took 25 ms of every start, a refused flag's and `--help`'s included."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


class VersionFlag(argparse._VersionAction):
    """`--version`: `PROG VERSION (revision REVISION)`, read when the flag is given."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        from exporter import build_info

        self.version = build_info.version_line("%(prog)s")
        super().__call__(parser, namespace, values, option_string)
