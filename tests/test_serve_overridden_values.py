"""A value given for a `serve` setting and then replaced is named, never passed over in silence.

argparse keeps the last of a flag given twice, and a flag wins over its `AUTOSCALER_*` variable: a user who added
`--source=prometheus` above the Deployment's `--source=scrape`, or set `AUTOSCALER_SOURCE=prometheus` under it,
got the scrape source and no word of it (s64 reviewer). `ServeSettings.overridden` keeps what was replaced, for
the start-up warnings (`autoscaler.unused_settings`, `autoscaler.preflight`) to name.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler import cli
from autoscaler.serve_args import settings_from_args
from autoscaler.settings import ServeSettings
from autoscaler.unused_settings import unused_settings

SOURCES = st.sampled_from(["scrape", "prometheus", "PROMETHEUS", " scrape"])
"""`--source` as a user may write it: the flag takes any letter case and spaces around (the same value)."""


def settings(argv: list[str], environ: dict[str, str]) -> ServeSettings:
    return settings_from_args(cli.build_parser().parse_args(["serve", *argv]), environ)


@given(flags=st.lists(SOURCES, max_size=4), variable=st.none() | SOURCES)
def test_every_source_given_and_not_used_is_named_and_the_one_used_is_not(flags: list[str],
                                                                          variable: str | None) -> None:
    argv = [word for value in flags for word in ("--source", value)]
    result = settings(argv, {} if variable is None else {"AUTOSCALER_SOURCE": variable})
    named = {(item.given_as, item.value) for item in result.overridden}
    given = [("flag --source", value.strip().lower()) for value in flags]
    if variable is not None:
        given.insert(0, ("variable AUTOSCALER_SOURCE", variable.strip().lower()))
    assert named == {(where, value) for where, value in given if value != result.source}
    assert result.source == (given[-1][1] if given else "scrape")


def test_a_flag_given_twice_with_the_same_value_or_once_over_the_same_variable_says_nothing() -> None:
    same = settings(["--log-level", "info", "--log-level", "INFO", "--refresh-interval", "15"],
                    {"AUTOSCALER_REFRESH_INTERVAL": "15s"})
    assert same.overridden == ()
    assert not [line for line in unused_settings(same) if "given" in line or "wins" in line]


def test_a_replaced_header_is_named_by_its_flag_without_its_value() -> None:
    """The warning names no value: a header or a URL may carry a token."""
    result = settings(["--prometheus-headers", "Authorization=Bearer s3cret"],
                      {"AUTOSCALER_PROMETHEUS_HEADERS": "Authorization=Bearer 0ld-s3cret"})
    (line,) = [line for line in unused_settings(result) if "AUTOSCALER_PROMETHEUS_HEADERS" in line]
    assert line.startswith("AUTOSCALER_PROMETHEUS_HEADERS does nothing: --prometheus-headers is given too"), line
    assert "s3cret" not in line
