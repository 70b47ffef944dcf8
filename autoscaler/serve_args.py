"""Reading `serve`'s flags and `AUTOSCALER_*` variables into `ServeSettings` (the flags are `serve_options`).

Every flag `--some-flag` can also be set with the variable `AUTOSCALER_SOME_FLAG`, as the exporter's flags
have `EXPORTER_*` twins: a pod spec templates variables more easily than arguments. A flag wins over its
variable; a variable is checked by the same converter as its flag, and a bad value is a `SettingsError` that
names the variable (the CLI prints it in one line and exits with status 2), never a silently ignored setting.
docs/configuration.md lists every flag and variable.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from autoscaler.serve_options import BY_DEST, ENV_PREFIX, OPTIONS
from autoscaler.settings import ServeSettings
from exporter import env_flags
from exporter.env_flags import EnvFlagError, overridden, resolve_flags, settings_fields, where_given
from exporter.flag_values import SECONDS_FORMS

_D: Final = ServeSettings()


class SettingsError(ValueError):
    """An `AUTOSCALER_*` variable holds a value its flag would refuse; the message names the variable."""


SERVE_DESCRIPTION: Final = (
    "Serve modelmesh_desired_replicas, modelmesh_gpu_busy, modelmesh_request_load and modelmesh_cache_pressure "
    "per runtime through external.metrics.k8s.io/v1beta1 over HTTPS. Every flag can also be set with the "
    "environment variable shown with it (AUTOSCALER_ and the flag's name); a flag wins over its variable; "
    f"a switch's variable takes true/false, and --no-SWITCH turns it off. SECONDS is {SECONDS_FORMS}. "
    "docs/configuration.md in the repository describes every flag, variable and policy key."
)


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every `serve` flag. Defaults are None here: `settings_from_args` fills in each unset flag from
    its variable, then from `ServeSettings`, so `--help` shows the real default, not the environment."""
    env_flags.add_flags(parser, OPTIONS)


def env_variables() -> tuple[str, ...]:
    """Every `AUTOSCALER_*` variable `serve` reads, in the order of its flags."""
    return tuple(option.env for option in OPTIONS)


def resolve(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Each flag's value: the flag when given, else its variable when set, else absent from the result.

    Raises SettingsError naming the first variable whose value its flag's converter refuses.
    """
    try:
        return resolve_flags(BY_DEST.values(), vars(args), os.environ if environ is None else environ)
    except EnvFlagError as error:
        raise SettingsError(str(error)) from None


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServeSettings:
    """Flags, then `AUTOSCALER_*` variables (from `environ`, default `os.environ`), then defaults."""
    v = resolve(args, environ)
    host, listen_port = v.get("listen", (_D.listen_host, _D.listen_port))
    environ = os.environ if environ is None else environ
    return replace(
        _D, **settings_fields(OPTIONS, v, by_hand={"listen"}), listen_host=host, listen_port=listen_port,
        given_by=tuple(where_given(BY_DEST.values(), vars(args), environ).items()),
        overridden=tuple(overridden(BY_DEST.values(), vars(args), environ)),
    )


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """The `AUTOSCALER_*` variables no flag reads, each as a warning (`env_flags.unknown_variables`)."""
    return env_flags.unknown_variables(OPTIONS, os.environ if environ is None else environ, ENV_PREFIX)


def given_as(settings: ServeSettings, dest: str) -> str:
    """The setting `dest` as the user gave it, `--namespaces` or `AUTOSCALER_NAMESPACES`; its flag where it
    was not given."""
    where = dict(settings.given_by).get(dest)
    return where.split(" ", 1)[1] if where is not None else BY_DEST[dest].flag
