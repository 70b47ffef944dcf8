"""Flags with environment-variable twins, the one way both command lines take their settings.

A pod spec templates variables more easily than arguments, so every flag `--some-flag` of the exporter and of
the adapter's `serve` has a variable `<PREFIX>SOME_FLAG` (dcgm-exporter does the same). A flag wins over its
variable; a variable is checked by its flag's own converter, and a value that converter refuses is an
`EnvFlagError` naming the variable: each CLI reports it its own way (argparse's exit 2, or `SettingsError`).

Lives in `exporter` because the adapter may import the exporter and never the other way round.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar


class EnvFlagError(ValueError):
    """A variable whose value its flag's converter refuses; the message names the variable."""


@dataclass(frozen=True, slots=True)
class EnvFlag:
    """One flag and how it is shown in `--help`; a subclass sets `env_prefix` for its command."""

    env_prefix: ClassVar[str] = ""
    flag: str
    convert: Callable[[str], Any]
    help: str
    default_text: str
    metavar: str | None = None
    group: str | None = None
    switch: bool = False  # a flag without a value; its variable takes true/false

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def env(self) -> str:
        return self.env_prefix + self.dest.upper()


def resolve_flags(options: Iterable[EnvFlag], given: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Each option's value: the flag when given (not None in `given`, by dest), else its variable when set,
    else absent from the result. Raises `EnvFlagError` for the first variable its converter refuses."""
    values: dict[str, Any] = {}
    for option in options:
        flag_value = given.get(option.dest)
        if flag_value is not None:
            values[option.dest] = flag_value
        elif (raw := environ.get(option.env)) is not None:
            try:
                values[option.dest] = option.convert(raw)
            except argparse.ArgumentTypeError as error:
                raise EnvFlagError(f"environment variable {option.env}: {error}") from None
    return values
