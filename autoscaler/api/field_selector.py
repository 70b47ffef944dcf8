"""The `fieldSelector` list option, refused where kube-apiserver refuses it for the external metrics API.

custom-metrics-apiserver serves external metrics with apiserver's `handlers.ListResource`, which decodes the
query's `ListOptions` before anything else: `fieldSelector` (its first value) is parsed by
`k8s.io/apimachinery/pkg/fields.ParseSelector`, and each field it names is then converted through the scheme,
which has no conversion of its own for external metrics and so falls back on
`runtime.DefaultMetaV1FieldSelectorConversion`: `metadata.name` and `metadata.namespace`, nothing else. Either
failure is a 400 `BadRequest` with Go's error. What passes changes nothing: the REST storage reads the label
selector alone (an external metric value has no metadata to match), and so does the adapter.

The errors are Go's, word for word, so that a client (or a person comparing with kube-apiserver) reads the same
thing; the parse error quotes the selector as sent, as Go's does (the Status body escapes it as JSON).
"""

from __future__ import annotations

import re

from autoscaler.api.list_options import BadListOption, go_quote

KNOWN_FIELDS = ("metadata.name", "metadata.namespace")
"""The fields `DefaultMetaV1FieldSelectorConversion` converts; any other is refused."""

MAX_FIELD_SELECTOR_LENGTH = 1024
"""As the label selector's: parsed a character at a time, a selector as long as the request line (8 KiB) held the
one serving worker 3 to 5 ms, HPAs' requests waiting behind it; no real one comes near."""

_OPERATOR = re.compile("!=|==|=")
"""`fields.termOperators`, in the order tried at each position: `==` before `=`, so that `a==b` is not `a` = `=b`."""


class BadFieldSelector(BadListOption):
    """A `fieldSelector` kube-apiserver would refuse; its message is Go's error."""


def refuse_bad_field_selector(selector: str | None) -> None:
    """Raise `BadFieldSelector` where kube-apiserver would refuse `selector` (the first `fieldSelector` value,
    decoded; None where there is none). Every term is parsed first, in sorted order as `parseSelector` sorts
    them, then the fields are converted: a term that does not parse is named before a field that is not known."""
    if not selector:
        return
    if len(selector) > MAX_FIELD_SELECTOR_LENGTH:  # Go has no limit; read unbounded, it held the serving worker
        raise BadFieldSelector(f"fieldSelector is longer than {MAX_FIELD_SELECTOR_LENGTH} characters: external "
                               f"metrics take {go_quote(KNOWN_FIELDS[0])} and {go_quote(KNOWN_FIELDS[1])} alone, "
                               "and select nothing by them")
    fields = []
    for term in sorted(_split_terms(selector)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise BadFieldSelector(f"invalid selector: '{selector}'; can't understand '{term}'")
        field, value = split
        _check_escapes(value)
        fields.append(field)
    for field in fields:
        if field not in KNOWN_FIELDS:
            raise BadFieldSelector(f"{go_quote(field)} is not a known field selector: only "
                                   f"{go_quote(KNOWN_FIELDS[0])}, {go_quote(KNOWN_FIELDS[1])}")


def _split_terms(selector: str) -> list[str]:
    """`fields.splitTerms`: the terms between commas, a backslash escaping the character after it."""
    terms = []
    start = 0
    escaped = False
    for index, char in enumerate(selector):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(selector[start:index])
            start = index + 1
    terms.append(selector[start:])
    return terms


def _split_term(term: str) -> tuple[str, str] | None:
    """`fields.splitTerm`: the field and the value around the first operator, None where there is none."""
    found = _OPERATOR.search(term)
    return None if found is None else (term[:found.start()], term[found.end():])


def _check_escapes(value: str) -> None:
    """`fields.UnescapeValue`'s refusals: a backslash escapes only `\\`, `,` and `=`, and `,` or `=` must be
    escaped. Its error names an unescaped rune by its code point (`%v` of a Go rune: `61` for `=`)."""
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise BadFieldSelector(f"invalid field selector: invalid escape sequence: \\{char}")
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise BadFieldSelector(f"invalid field selector: unescaped character in value: {ord(char)}")
    if escaped:
        raise BadFieldSelector("invalid field selector: invalid escape sequence: \\")
