"""The label matchers the Prometheus source adds to every series selector it sends (docs/operations.md).

`--prometheus-series-selector` (`job="modelmesh-exporter"`) says which series to trust. Without it every query
reads the exporters' metric names from *any* job, and a job that keeps the labels its targets write (a
Pushgateway, a tenant's PodMonitor with `honorLabels: true`, a shared remote-write) lets a tenant write
`modelmesh_pod_requests_per_second{namespace="A",pod="a-0"}` into another namespace's runtime, or a fresh
success time that makes that runtime's hung exporter look fresh: `max by (namespace, pod)` takes it.

The namespaces discovery reads (`--namespaces`, and those of the policy file's runtimes) say which pods to read:
without that matcher a large shared Prometheus was asked for every pod it knows, in every namespace, which cost
its CPU and, past its `--query.max-samples`, ended in a 422 `too many samples` for every refresh.

The grammar is PromQL's (`label="value"`, `!=`, `=~`, `!~`, strings in double or single quotes or backticks),
checked when the flag is read, so a typo is refused at start with the flag's name instead of failing every
refresh with Prometheus's `parse error`, which names no flag.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

LABEL_NAME: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
"""A label name as PromQL takes it unquoted, in `by (...)` and in matchers."""

_ESCAPE: Final = r"""\\(?:[abfnrtv\\]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3})"""
"""The escapes PromQL's quoted strings take (Go's), but for the quote: a string escapes only the quote it is in
(`"a\\"b"`, `'a\\'b'`); any other backslash is Prometheus's `unknown escape sequence`."""

_MATCHER: Final = re.compile(
    rf"""\s*(?P<label>{LABEL_NAME.pattern})\s*(?P<op>=~|!~|!=|=)\s*"""
    rf"""(?P<value>"(?:[^"\\\n]|{_ESCAPE}|\\")*"|'(?:[^'\\\n]|{_ESCAPE}|\\')*'|`[^`]*`)\s*(?:,|\Z)""")

_RE2_ONLY: Final = re.compile(r"\\(?:[pP](?:\{[^}]*\}|[A-Za-z])|z|C|Q(?P<quoted>.*?)(?:\\E|\Z))|\\.", re.DOTALL)
"""RE2's escapes that Python's `re` lacks (Unicode classes `\\pL` `\\p{Greek}`, `\\z`, `\\C`, `\\Q...\\E`),
and every other escape pair, so that an escaped backslash is never read as the start of one."""


def _as_python_regex(pattern: str) -> str:
    """`pattern`, an RE2 expression as Prometheus reads it, with RE2's own escapes put as Python's `re` can check
    them (a class as `.`, `\\z` as `\\Z`, a quoted run escaped), so that what RE2 takes is not refused here."""
    def said(escape: re.Match[str]) -> str:
        text = escape.group()
        if escape["quoted"] is not None:
            return re.escape(escape["quoted"])
        if text[1] in "pPC":
            return "."
        return r"\Z" if text == r"\z" else text
    return _RE2_ONLY.sub(said, pattern)


MATCHERS_EXAMPLE: Final = 'job="modelmesh-exporter"'


def parse_matchers(text: str) -> tuple[str, ...]:
    """`text`'s PromQL label matchers, each as written (`job="x"`), in order; braces around them are optional.

    Raises ValueError saying what is wrong and where. A regular expression (`=~`, `!~`) is checked with Python's
    `re`, RE2's own escapes put as `re` reads them (`_as_python_regex`); `re` also takes a few things RE2
    refuses (look-arounds, back references): Prometheus then says so at the first refresh."""
    inside = text.strip()
    if inside.startswith("{") and inside.endswith("}"):
        inside = inside[1:-1].strip()
    matchers: list[str] = []
    at = 0
    while at < len(inside):
        found = _MATCHER.match(inside, at)
        if found is None:
            backslash = ("; a backslash in a quoted value is written twice (\\\\d), or write the value in backticks"
                         if "\\" in inside[at:] else "")
            raise ValueError(f"no label matcher at {inside[at:at + 40]!r} (character {at + 1}): write "
                             f'label="value" (or !=, =~, !~), separated by commas, as {MATCHERS_EXAMPLE}'
                             f"{backslash}")
        label, op, value = found["label"], found["op"], found["value"]
        if label == "__name__":
            raise ValueError("__name__ cannot be matched: the adapter's queries name each series' metric")
        if op in ("=~", "!~"):
            try:
                with warnings.catch_warnings():  # "possible nested set" for a POSIX class, which RE2 takes
                    warnings.simplefilter("ignore", FutureWarning)
                    re.compile(_as_python_regex(_unquoted(value)))
            except re.error as error:
                raise ValueError(f"{label}{op}{value} is not a valid regular expression: {error}") from None
        matchers.append(f"{label}{op}{value}")
        at = found.end()  # past its comma (a trailing one too, as PromQL allows)
    if not matchers:
        raise ValueError(f"expected at least one label matcher, as {MATCHERS_EXAMPLE}")
    return tuple(matchers)


def _unquoted(value: str) -> str:
    """A PromQL string literal's text (the grammar above checked its escapes)."""
    if value.startswith("`"):
        return value[1:-1]
    # Go's escapes are Python's; non-ASCII text survives the round trip as \\u escapes.
    return value[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")


_STRING_ESCAPES: Final = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"} | {
    chr(code): f"\\x{code:02x}" for code in (*range(0x20), 0x7F) if chr(code) not in "\n\r\t"}
"""What a PromQL string cannot hold as itself: the quote and the escape character, and the control characters
(a raw newline ends the query with `unterminated quoted string`), each as PromQL's own escape of it."""
_STRING_TABLE: Final = str.maketrans(_STRING_ESCAPES)


def promql_string(value: str) -> str:
    """`value` as a double-quoted PromQL string, on one line: Prometheus reads it back as `value`."""
    return '"' + value.translate(_STRING_TABLE) + '"'


_REGEX_SPECIAL: Final = re.compile(r"[\\.+*?()|\[\]{}^$]")
"""The characters RE2 reads as syntax outside a class: a namespace has none (`-` is plain there), a label
value may."""


def one_of(label: str, values: Sequence[str]) -> str:
    """The matcher of `label` equal to one of `values` (none: no matcher, empty text): `=` for one, else an
    anchored alternation of the values, each with its regex characters escaped."""
    if not values:
        return ""
    if len(values) == 1:
        return f"{label}={promql_string(values[0])}"
    alternatives = "|".join(_REGEX_SPECIAL.sub(r"\\\g<0>", value) for value in values)
    return f"{label}=~{promql_string(alternatives)}"


def selector(name: str, *matchers: str) -> str:
    """The selector of metric `name` with `matchers` (empty ones left out): `name{a="1",b="2"}`, or bare."""
    inside = ",".join(matcher for matcher in matchers if matcher)
    return f"{name}{{{inside}}}" if inside else name


@dataclass(frozen=True, slots=True)
class SeriesMatchers:
    """What every selector of the exporters' series, and of DCGM's, carries besides its own matchers."""

    exporter: tuple[str, ...] = ()
    dcgm: tuple[str, ...] = ()

    @classmethod
    def of(cls, series_selector: Sequence[str] = (), namespaces: Sequence[str] = (), *,
           namespace_label: str = "namespace", dcgm_namespace_label: str = "namespace") -> SeriesMatchers:
        """`series_selector` (`parse_matchers`) on the exporters' series, and `namespaces` (none: all) on both
        sources' series by each one's namespace label. DCGM's series come from another job (dcgm-exporter), so
        the exporters' selector, which names their job, is not added to them."""
        return cls(exporter=(*series_selector, one_of(namespace_label, namespaces)),
                   dcgm=(one_of(dcgm_namespace_label, namespaces),))

    def exporter_series(self, name: str, *own: str) -> str:
        """The selector of the exporters' metric `name`, with its `own` matchers first."""
        return selector(name, *own, *self.exporter)

    def dcgm_series(self, name: str, *own: str) -> str:
        """The selector of DCGM's metric `name`, with its `own` matchers first."""
        return selector(name, *own, *self.dcgm)


EVERY_SERIES: Final = SeriesMatchers()
"""No matcher added: every job's series, in every namespace."""
