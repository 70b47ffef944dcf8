"""Flags with environment-variable twins, the one way both command lines take their settings.

A pod spec templates variables more easily than arguments, so every flag `--some-flag` of the exporter and of
the adapter's `serve` has a variable `<PREFIX>SOME_FLAG` (dcgm-exporter does the same). A flag wins over its
variable; a variable is checked by its flag's own converter, and a value that converter refuses is an
`EnvFlagError` naming the variable: each CLI reports it its own way (argparse's exit 2, or `SettingsError`).

Lives in `exporter` because the adapter may import the exporter and never the other way round.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from exporter.flag_values import seconds
from exporter.kube_names import namespace_problem


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
    switch: bool = False  # a flag without a value and its off form (`Switch`); its variable takes true/false
    setting: str | None = None
    """The settings field the value goes to where it is not the flag's name (`--window`: `window_s`), so that
    the flag table alone says where each flag lands (`settings_fields`) and adding a flag is one edit."""
    to_setting: Callable[[Any], Any] | None = None
    """What the field holds of the value where it is not the value itself (`on`/`off` kept as a bool)."""

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def field(self) -> str:
        """The settings field this flag sets (`setting`, else its dest)."""
        return self.setting or self.dest

    @property
    def env(self) -> str:
        return self.env_prefix + self.dest.upper()


def off_flag(flag: str) -> str:
    """The spelling that turns the switch `flag` off: `--no-X` for `--X`, and `--X` for a switch that is itself
    a `--no-X` (`--no-gpu` is turned off, the GPU collector on, by `--gpu`)."""
    name = flag.removeprefix("--")
    return f"--{name.removeprefix('no-')}" if name.startswith("no-") else f"--no-{name}"


FLAG_VALUES: Final = "_flag_values"
"""The parsed namespace's attribute holding each flag's values in the order given, by dest (`keep_each`)."""


def keep_each(namespace: argparse.Namespace, dest: str, value: Any) -> None:
    """Store a flag's value as argparse does (the last one given wins), and keep each value given in
    `FLAG_VALUES`: argparse alone dropped an earlier `--source prometheus` under a later `--source scrape`
    without a trace, so nothing could say that the user had given both (`overridden`)."""
    setattr(namespace, dest, value)
    given: dict[str, list[Any]] | None = getattr(namespace, FLAG_VALUES, None)
    if given is None:
        given = {}
        setattr(namespace, FLAG_VALUES, given)
    given.setdefault(dest, []).append(value)


class KeepEach(argparse.Action):
    """A flag with a value, stored as argparse's own `store` does, each value kept (`keep_each`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        keep_each(namespace, self.dest, values)


class Switch(argparse.Action):
    """A switch and its off form, `--quiet` and `--no-quiet`, as `argparse.BooleanOptionalAction` makes them,
    for a switch spelled `--no-X` too (`--no-gpu` and `--gpu`, where BooleanOptionalAction's `--no-no-gpu` would
    set the opposite). The off form is what overrides a variable set to true in a pod spec from the arguments
    (and the other way round): with the switch alone a Deployment's `EXPORTER_NO_GPU=true` could not be undone by
    its args. The value is None unless one is given, so that a variable can apply (`resolve_flags`)."""

    def __init__(self, option_strings: list[str], dest: str, default: Any = None, help: str | None = None,
                 **kwargs: Any) -> None:
        if len(option_strings) != 1:
            raise ValueError(f"a Switch is one flag, its off form is added: got {option_strings}")
        super().__init__([*option_strings, off_flag(option_strings[0])], dest, nargs=0, default=default,
                         help=help, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        keep_each(namespace, self.dest, option_string == self.option_strings[0])

    def format_usage(self) -> str:
        return " | ".join(self.option_strings)


def own_group(option: EnvFlag) -> str | None:
    """The `--help` group an option names itself (`EnvFlag.group`; None: the parser's own list)."""
    return option.group


def add_flags(parser: argparse.ArgumentParser, options: Iterable[EnvFlag],
              group_of: Callable[[EnvFlag], str | None] = own_group) -> None:
    """Add each option as both programs' `--help` shows it: its help with its default and its variable, under
    the group `group_of` names, a switch with its off form (`Switch`), a duration as SECONDS unless it names its
    own metavar. Defaults are None here, so that an unset flag can take its variable (`resolve_flags`) and
    `--help` shows the real default, not the environment."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for option in options:
        title = group_of(option)
        target: argparse.ArgumentParser | argparse._ArgumentGroup = parser
        if title is not None:
            target = groups.setdefault(title, parser.add_argument_group(title))
        help_text = f"{option.help} (default: {option.default_text}; env {option.env})"
        if option.switch:
            target.add_argument(option.flag, action=Switch, help=help_text)
        else:
            metavar = option.metavar or ("SECONDS" if option.convert is seconds else None)
            target.add_argument(option.flag, action=KeepEach, type=option.convert, default=None, metavar=metavar,
                                help=help_text)


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


def settings_fields(options: Iterable[EnvFlag], values: Mapping[str, Any],
                    by_hand: Collection[str] = ()) -> dict[str, Any]:
    """The settings fields of the values `resolve_flags` found, each under its flag's `field` and made what the
    field holds (`to_setting`); a flag not found is left out, so its field keeps the default. The dests in
    `by_hand` are the caller's to place: one value in two fields (`--listen`), or values checked together."""
    return {option.field: option.to_setting(values[option.dest]) if option.to_setting else values[option.dest]
            for option in options if option.dest in values and option.dest not in by_hand}


def where_given(options: Iterable[EnvFlag], given: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """Where each option `resolve_flags` found was set, by dest: `flag --some-flag` or `variable PREFIX_SOME_FLAG`,
    for a message that names what the user wrote (a value from a pod spec's variable is not from its flag)."""
    where: dict[str, str] = {}
    for option in options:
        if given.get(option.dest) is not None:
            where[option.dest] = f"flag {option.flag}"
        elif option.env in environ:
            where[option.dest] = f"variable {option.env}"
    return where


@dataclass(frozen=True, slots=True)
class Overridden:
    """A value given for a setting that a later one replaced, so did nothing: an earlier flag of the same name
    (argparse keeps the last), or the flag's variable (a flag wins over its variable)."""

    dest: str
    given_as: str
    """`flag --some-flag` or `variable PREFIX_SOME_FLAG`, as `where_given` names it."""
    value: Any
    """As its flag's converter made it; a variable's text as it is where the converter refuses it."""


def overridden(options: Iterable[EnvFlag], given: Mapping[str, Any], environ: Mapping[str, str]) -> list[Overridden]:
    """The values given and replaced, each unlike the one in use, in the order of the options, then as given:
    what a message names where a user set a value and another was used (two `--source`s in a Deployment's args,
    or `AUTOSCALER_SOURCE` under a `--source` flag). `given` is the parsed namespace's `vars`."""
    found: list[Overridden] = []
    values: Mapping[str, list[Any]] = given.get(FLAG_VALUES) or {}
    for option in options:
        used = given.get(option.dest)
        if used is None:
            continue
        raw = environ.get(option.env)
        if raw is not None:
            try:
                from_variable = option.convert(raw)
            except argparse.ArgumentTypeError:  # not read at all: the flag wins (`resolve_flags`)
                from_variable = raw
            if from_variable != used:
                found.append(Overridden(option.dest, f"variable {option.env}", from_variable))
        found.extend(Overridden(option.dest, f"flag {option.flag}", value)
                     for value in values.get(option.dest, [])[:-1] if value != used)
    return found


def overridden_said(items: Iterable[Overridden], flag_named: Callable[[str], str]) -> list[str]:
    """A warning for each flag given again with another value, and each variable under a flag of another value
    (`overridden`), both programs' words: argparse keeps a flag's last value and a flag wins over its variable, both
    without a word, so an added `--source=prometheus` above a Deployment's `--source=scrape`, or
    `AUTOSCALER_SOURCE=prometheus` under it, left the adapter scraping. `flag_named(dest)` names the flag. The
    values are not named: a header or a URL may hold a secret."""
    said = []
    for dest, where in dict.fromkeys((item.dest, item.given_as) for item in items):
        flag = flag_named(dest)
        if where.startswith("flag "):
            said.append(f"{flag} is given more than once, with different values: only the last one is used, the "
                        "earlier ones do nothing; give it once")
        else:
            said.append(f"{where.removeprefix('variable ')} does nothing: {flag} is given too, with another value, "
                        "and a flag wins over its variable; drop one of them")
    return said


_SERVICE_LINK: Final = re.compile(
    r".*_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)")
"""The variables the kubelet puts in every container for each Service of its namespace (`<NAME>_SERVICE_HOST`,
`<NAME>_PORT_9187_TCP_ADDR`, ...) but the bare `<NAME>_PORT` (`_SERVICE_URL`): a Service named `exporter` or
`autoscaler-...` makes some with our prefix."""
_SERVICE_URL: Final = re.compile(r"(tcp|udp|sctp)://\S+", re.IGNORECASE)
"""The value of the kubelet's bare `<NAME>_PORT` (`tcp://10.0.0.7:9187`)."""


def _is_service_link(name: str, value: str) -> bool:
    """Whether a variable is one the kubelet makes for a Service. A bare `<NAME>_PORT` is one only when it holds
    the kubelet's URL: by name alone, a misspelt `AUTOSCALER_EXPORTR_PORT=9188` passed for a Service's link and
    was ignored without a word."""
    if _SERVICE_LINK.fullmatch(name):
        return True
    return name.endswith("_PORT") and _SERVICE_URL.fullmatch(value.strip()) is not None


def unknown_variables(options: Iterable[EnvFlag], environ: Mapping[str, str], prefix: str) -> list[str]:
    """A warning for each variable with the command's `prefix` that no flag reads, naming the one meant where
    one is close. A typo in a pod spec (`EXPORTER_MODELMESH_INSECRUE`) was ignored without a word and showed
    only later, as the failure the setting was to prevent. Not refused: a Service's links share the prefix."""
    known = {option.env for option in options}
    # Compared without the prefix every name shares: with it, `AUTOSCALER_PORT` read as close to
    # `AUTOSCALER_SOURCE` (0.8 of the letters alike, 0.4 past the prefix) and the hint named a setting nobody meant.
    tails = {env.removeprefix(prefix): env for env in known}
    said = []
    for name in sorted(environ):
        if not name.startswith(prefix) or name in known or _is_service_link(name, environ[name]):
            continue
        close = difflib.get_close_matches(name.removeprefix(prefix), tails, n=1, cutoff=0.7)
        meant = f" (did you mean {tails[close[0]]}?)" if close else ""
        said.append(f"environment variable {name} is not a setting{meant}; ignored (--help lists every variable)")
    return said


def namespace(value: str) -> str:
    """A namespace name (a DNS-1123 label), for both programs' flags. The Kubernetes API answers a list in a
    namespace that cannot exist with no objects, and the kubelet finds no pod there, so a typo (`modelmesh_serving`)
    showed only as runtimes "not known to the adapter", or a sidecar that never learnt its GPUs."""
    name = value.strip()
    if not name:
        raise argparse.ArgumentTypeError("expected a value, got an empty one")
    if (rule := namespace_problem(name)) is not None:
        raise argparse.ArgumentTypeError(f"expected a namespace name ({rule}), got {value!r}")
    return name
