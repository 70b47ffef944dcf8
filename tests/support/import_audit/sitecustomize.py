"""Put on `PYTHONPATH` of a process the tests start, with `IMPORT_AUDIT_DIR` set: every module of the package
`IMPORT_AUDIT_PACKAGE` that the process (or a process it spawns, which inherits the environment) imports is
written to `IMPORT_AUDIT_DIR/<pid>`, one name a line, at the moment it is imported. So a test sees from outside
what each of an adapter's processes loaded, where Python's own import log (`PYTHONPROFILEIMPORTTIME`) mixes
every process's lines on one stderr without saying whose they are."""

from __future__ import annotations

import os
import sys
from typing import Any


def _install(directory: str, package: str) -> None:
    path = os.path.join(directory, str(os.getpid()))

    def record(event: str, args: tuple[Any, ...]) -> None:
        if event == "import" and isinstance(args[0], str) and args[0].split(".")[0] == package:
            with open(path, "a", encoding="utf-8") as file:
                file.write(args[0] + "\n")

    sys.addaudithook(record)


if os.environ.get("IMPORT_AUDIT_DIR"):
    _install(os.environ["IMPORT_AUDIT_DIR"], os.environ.get("IMPORT_AUDIT_PACKAGE", "kubernetes"))
