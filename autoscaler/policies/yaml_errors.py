"""A YAML mistake as one line, `FILE:LINE:COLUMN: not valid YAML: what`, for every file a user hands us as
YAML (the policy file `serve` and `simulate` read, the HPA manifest `simulate --hpa-behavior` reads).

PyYAML's own message is five lines with copies of the text and carets, whose marks name "<unicode string>"
(the file was read as text first) rather than the file; in a log or an error line that reads as noise. Pure
formatting, no I/O: the policies package may hold it, and the simulation imports it from here."""

from __future__ import annotations

import os

import yaml


def yaml_error_text(path: str | os.PathLike[str], error: yaml.YAMLError) -> str:
    """One line, `FILE:LINE:COLUMN: not valid YAML: what`, as compilers and linters write it (only `FILE:`
    when PyYAML gives no position); what started the construct that broke, when PyYAML says."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or (str(error).splitlines() or ["unreadable"])[0]
    where = f"{os.fspath(path)}:{mark.line + 1}:{mark.column + 1}" if mark is not None else os.fspath(path)
    context, context_mark = getattr(error, "context", None), getattr(error, "context_mark", None)
    started = ""
    if context and context_mark is not None and context_mark.line != getattr(mark, "line", None):
        started = f" ({context} at line {context_mark.line + 1})"
    elif context:
        started = f" ({context})"
    return f"{where}: not valid YAML: {' '.join(str(problem).split())}{started}"
