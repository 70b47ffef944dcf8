"""The list options of a request's query as kube-apiserver decodes them before it lists, so that one it would
refuse is refused here the same way.

apiserver's list handler (`k8s.io/apiserver` `handlers.ListResource`, which the external metrics API of
`custom-metrics-apiserver` and metrics-server runs) decodes `metav1.ListOptions` from the query first, and a
value that does not convert is a 400 `BadRequest` carrying Go's error. Of its fields only the two integers can
fail: `limit` and `timeoutSeconds`, int64s read by `strconv.ParseInt(value, 10, 64)` from a key's first value.
Its booleans never fail (any value but `0` and `false` is true: `negotiation.asks_to_watch`), nor its strings.
The adapter uses none of them, but a client that sent `limit=abc` and got a list would take it as read.
"""

from __future__ import annotations

from collections.abc import Mapping

INTEGER_OPTIONS = ("timeoutSeconds", "limit")
"""The int64 fields of `metav1.ListOptions` in the order its generated conversion reads them: the first that
fails is the one reported."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT64_MAX = 2**64 - 1


class BadListOption(ValueError):
    """A list option kube-apiserver would not decode; its message is what the 400 says."""


def refuse_bad_list_options(query: Mapping[str, str]) -> None:
    """Raise `BadListOption` for the first integer option (`INTEGER_OPTIONS`) whose first value is no int64;
    nothing otherwise. `query` is decoded (keys and values), as Go's `url.ParseQuery` gives them."""
    for key in INTEGER_OPTIONS:
        value = query.get(key)
        if value is not None and (problem := parse_int64_error(value)) is not None:
            raise BadListOption(f"query parameter {key}: {problem}")


def parse_int64_error(text: str) -> str | None:
    """Go's error for `strconv.ParseInt(text, 10, 64)` (`strconv.ParseInt: parsing "x": invalid syntax`, or
    `value out of range`), None where it parses. Read as Go reads it: an optional sign, then ASCII digits only
    (no blanks, no `_`, no other script's digits, which Python's `int` would take), a range error as soon as the
    digits pass 2**64 - 1 even before a later bad character, and then the int64 bounds."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits:
        return _num_error(text, "invalid syntax")
    number = 0
    for char in digits:
        if not "0" <= char <= "9":
            return _num_error(text, "invalid syntax")
        number = number * 10 + ord(char) - ord("0")
        if number > _UINT64_MAX:
            return _num_error(text, "value out of range")
    signed = -number if text[0] == "-" else number
    if not _INT64_MIN <= signed <= _INT64_MAX:
        return _num_error(text, "value out of range")
    return None


def _num_error(text: str, reason: str) -> str:
    return f"strconv.ParseInt: parsing {go_quote(text)}: {reason}"


_SHORT_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
                  "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """`text` as Go's `strconv.Quote` writes it: double quotes, printable characters as they are, the others
    escaped (`\\n`, `\\x00`, `\\u200b`), so that a line break or a control character in what a client sent
    shows in the message rather than acting on whoever reads it."""
    out = []
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'
