"""How a command line names standard input (`-`), and how messages name it: shared by `simulate --trace`, the
converters and the advice that names a converter's command line, which may not import the trace reader."""

from __future__ import annotations

from typing import Final

STDIN: Final = "-"
"""The input name that reads standard input (`--trace -`, `minute_table -`, `request_log -`)."""
STDIN_NAME: Final = "standard input"
"""How errors and the report name an input read from standard input."""
