"""The values both programs' flags and variables take (seconds, URLs, files, numbers, lists), each read from the
flag's or the variable's text by one converter that raises `argparse.ArgumentTypeError`: one place, so that the
exporter and the adapter read `30s` or a URL alike, and the modules that only need a URL for a log line
(`without_password`) do not import either program's settings.
"""

from __future__ import annotations

import argparse
import math
import re
import ssl
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Final

LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")
"""What `--log-level` takes in both programs."""


def host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.strip().rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    if not 0 <= int(port) < 65536:  # the form was right: "expected HOST:PORT" sent the user looking at it
        raise argparse.ArgumentTypeError(f"port must be 0 to 65535, got {value!r}")
    return host.strip("[]"), int(port)  # an empty host: every address, IPv4 and IPv6


DURATION_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
"""The units a seconds-valued flag takes after its number, as kube's and Go's durations write them."""


_WITH_UNIT: Final = re.compile(r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*(ms|s|m|h)")


SECONDS_FORMS: Final = "a number of seconds, or one with a unit: 500ms, 30s, 5m, 1h"
"""What every seconds-valued flag of both programs takes, as `--help` and the errors say it."""


def duration_seconds(value: str) -> float:
    """Seconds, of any sign, from a bare number (`30`, `0.5`) or a number with one unit (`500ms`, `30s`, `5m`,
    `1h`): the one parser of every seconds-valued flag and variable of both programs, so that no flag takes
    `30s` while its neighbour refuses it (`--prometheus-timeout 5s` was taken, `--refresh-interval 30s` refused)."""
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        found = _WITH_UNIT.fullmatch(text)
        if found is None:
            raise argparse.ArgumentTypeError(
                f"expected a number of seconds, got {value!r} ({SECONDS_FORMS})") from None
        number = float(found[1]) * DURATION_UNITS[found[2]]
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {value!r}")
    return number


def greater_than_zero(number: float, value: str) -> float:
    """`number`, read from `value`, where it is greater than 0; else the error every such flag of both programs
    gives."""
    if not number > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value!r}")
    return number


def seconds(value: str) -> float:
    """`duration_seconds` greater than 0."""
    return greater_than_zero(duration_seconds(value), value)


def seconds_from_zero(value: str, zero: str = "") -> float:
    """`duration_seconds` of at least 0, however 0 is written (`0.0`, `-0`, `0s`); `zero` says what 0 does
    where the error should say it (`" (off)"`)."""
    number = duration_seconds(value)
    if not number >= 0:
        raise argparse.ArgumentTypeError(f"must be 0{zero} or more, got {value!r}")
    return number or 0.0  # -0 is 0


def seconds_within(lowest: float, highest: float,
                   read: Callable[[str], float] = duration_seconds) -> Callable[[str], float]:
    """A flag's converter: seconds as `read` reads them, refused outside [`lowest`, `highest`] (an interval given
    in the wrong unit, 1e-6 or 1e20, ran without pause or never), with the range in the error whatever side the
    value is on: `0` was told "must be greater than 0", a range that `--help` did not state."""
    return number_within(lowest, highest, "seconds", read)


def number_within(lowest: float, highest: float, unit: str,
                  read: Callable[[str], float] | None = None) -> Callable[[str], float]:
    """`seconds_within` for a number in another `unit` (`ms`, `req/s`), read as a plain finite number unless
    `read` is given: one range check, and one error, for every bounded number of both programs."""
    reader = _number if read is None else read

    def convert(value: str) -> float:
        number = reader(value)
        if not lowest <= number <= highest:
            raise argparse.ArgumentTypeError(f"must be {lowest:g} to {highest:g} {unit}, got {value!r}")
        return number

    return convert


def seconds_or_off(value: str) -> float:
    """Seconds, or 0 for a feature turned off."""
    return seconds_from_zero(value, " (off)")


def without_password(url: str) -> str:
    """`url` for logs and errors: a password in it (basic auth, `https://user:password@host`) as `***`. Read
    by hand rather than by `urlsplit`, which raises on the malformed URLs that the errors quote."""
    scheme, separator, rest = url.partition("://")
    end = min((found for found in map(rest.find, "/?#") if found >= 0), default=len(rest))
    userinfo, at, host = rest[:end].rpartition("@")
    if not separator or not at or ":" not in userinfo:
        return url
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{host}{rest[end:]}"


def metrics_url(value: str) -> str:
    """An http(s) URL with a host and a valid port, if any: a typo such as `:2112metrics` would otherwise
    fail every scrape for good, and a malformed one (`http://[::1/`) raises ValueError, which argparse
    turns into an error for a flag but the environment variables would not."""
    try:
        parsed = urllib.parse.urlsplit(value.strip())
        _ = parsed.port  # raises ValueError for a port that is not a number in 0..65535
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"expected an http:// or https:// URL, got {without_password(value)!r}: {error}") from error
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// URL, got {without_password(value)!r}")
    return value.strip()


def file_path(value: str) -> Path:
    """A path, not checked here (the component that reads it says what is wrong); never empty: a templated
    variable left empty was the path `.`, whose error then named something else. Both commands' `FILE`s."""
    if not value.strip():
        raise argparse.ArgumentTypeError("expected a file path, got an empty value")
    return Path(value.strip())


def ca_file(value: str) -> Path:
    """A readable PEM bundle: checked now, so a wrong path fails at start-up and not at every scrape."""
    path = file_path(value)
    try:
        ssl.create_default_context(cafile=str(path))
    except (OSError, ssl.SSLError) as error:
        raise argparse.ArgumentTypeError(f"cannot use {value!r} as a CA bundle: {error}") from error
    return path


def boolean(value: str) -> bool:
    text = value.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def log_level(value: str) -> str:
    level = value.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return level


_PERCENT = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*%\s*")


def _number(value: str) -> float:
    try:
        number = float(value)
    except ValueError as error:
        found = _PERCENT.fullmatch(value)
        if found:  # `80%` for a ratio: say the number to write (seconds take units: `seconds`)
            raise argparse.ArgumentTypeError(
                f"expected a ratio, got {value!r}: write {float(found[1]) * 0.01:g}") from error
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from error
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {value!r}")
    return number


def positive(value: str) -> float:
    """A finite number greater than 0 that is not seconds (a rate, hours): seconds are `seconds`."""
    return greater_than_zero(_number(value), value)


def order(value: str) -> float:
    """A power-mean order: a finite number of at least 1."""
    number = _number(value)
    if not number >= 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value!r}")
    return number


def fraction(value: str) -> float:
    """A ratio in (0, 1]."""
    number = positive(value)
    if number > 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value!r}")
    return number


def whole_number_within(value: str, lowest: int, highest: int | None, bounds: str) -> int:
    """A whole number from `lowest` to `highest` (None: no bound), refused with `bounds` as the error says the range
    (`1 to 32 (each is an exporter process here)`): the one reading of every count-valued flag."""
    try:
        number = int(value.strip())
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from error
    if number < lowest or (highest is not None and number > highest):
        raise argparse.ArgumentTypeError(f"must be {bounds}, got {value!r}")
    return number


def count(value: str) -> int:
    """A whole number of at least 1."""
    return whole_number_within(value, 1, None, "at least 1")


def whole_number(value: str) -> int:
    """A whole number of at least 0 (a count that may be none, a random seed)."""
    return whole_number_within(value, 0, None, "0 or more")


def port(value: str) -> int:
    number = count(value)
    if number > 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 1..65535, got {value!r}")
    return number


def text(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("expected a value, got an empty one")
    return value.strip()


def csv(value: str) -> tuple[str, ...]:
    """A comma-separated list; blanks around items are dropped, and an empty value is an empty list."""
    return tuple(part.strip() for part in value.split(",") if part.strip())


def choice(*allowed: str, upper: bool = False) -> Callable[[str], str]:
    """One of `allowed`, in any letter case."""

    def convert(value: str) -> str:
        normal = value.strip().upper() if upper else value.strip().lower()
        if normal not in allowed:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(allowed)}, got {value!r}")
        return normal

    return convert


MODELMESH_INTERVAL_RANGE_S = (0.1, 3600.0)
"""The ModelMesh read intervals taken: 1e-6 (a slip of unit) polled ModelMesh without pause, a third of a core."""

LOAD_WINDOW_RANGE_S = (MODELMESH_INTERVAL_RANGE_S[0], 3600.0)
"""The load windows taken. The window keeps every reading within it: `--load-window 1e12` kept every reading for
ever, the sidecar's memory growing towards its 256Mi limit (some 9 MB a day at the 5 s interval). An hour keeps at
most 36,000 readings at the shortest interval (0.1 s), a few MB, and is already far longer than any scaling
decision looks back (the HPA's 15 s syncs; the adapter's `--window` reports it); it is also the longest interval,
which the window must cover. Below, the shortest interval: a window shorter than the interval is refused anyway."""
