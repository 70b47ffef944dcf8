"""`TraceError`, apart from the trace reader: the command line's limits (`synthetic_size`) raise it, and every
command's parser imports them, so this module stays free of numpy (`serve` never loads it)."""

from __future__ import annotations


class TraceError(ValueError):
    """The trace cannot be used; the message names the file, the line and what to fix."""
