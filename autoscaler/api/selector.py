"""Reading the runtime out of the HPA's `labelSelector` (docs/design.md, What the adapter serves).

The HPA sends `metric.selector` as a label selector string. It must select exactly one runtime, by its labels
`deployment=<name>` or `servingruntime=<name>`. Its requirements all hold at once, as `k8s.io/apimachinery/pkg/
labels` ANDs them: `=`, `==` and `in (...)` name runtimes, and where several do, the runtime is the one they all
name (`deployment in (a,b),deployment=a` is `a`); `!=`, `notin`, a key alone (exists) and `!key` only narrow
those (`runtime_selected`). Anything that does not come to one runtime is answered with a 400 that quotes what
was sent and says what to write instead.
"""

from __future__ import annotations

import difflib
import functools
import re

from yarl import URL

from autoscaler.api.field_selector import refuse_bad_field_selector
from autoscaler.api.list_options import refuse_bad_list_options
from autoscaler.api.negotiation import asks_to_watch
from autoscaler.names import SELECTOR_DEPLOYMENT, SELECTOR_SERVINGRUNTIME, SERVINGRUNTIME_DEPLOYMENT_PREFIX

HELP = (
    f"labelSelector must name one runtime: '{SELECTOR_DEPLOYMENT}=<Deployment name>' or "
    f"'{SELECTOR_SERVINGRUNTIME}=<ServingRuntime name>'"
)
_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)")
"""A label value, but for the empty one: up to 63 characters, alphanumeric at both ends, '-', '_', '.' inside."""
BLANKS = " \t\r\n"
"""What apimachinery's selector lexer skips between tokens (`isWhitespace`): a `deployment=x` with a line break
before or after any token (`%0A` sent by a script's heredoc or a YAML block scalar) names `x`, as
kube-apiserver reads it. Nothing else is whitespace: a vertical tab or a Unicode space is part of a token, and
so a key or value no label holds. No refusal strips them from the requirement it quotes (`repr` shows them), and
an accepted selector gives a name of label characters only, so none of them reaches a log line."""
_W = "[ \t\r\n]"
_KEY = r"[A-Za-z0-9./_-]+"
# The whole requirement must match (`fullmatch`; `$` would also match before a final newline). An equality's
# value is whatever is left (DOTALL: a line break inside it too), checked against `_VALUE` afterwards so that a
# bad one is named; a set's values are what lies between its commas.
_EQUALITY = re.compile(rf"{_W}*({_KEY}){_W}*(==|=|!=){_W}*(.*?){_W}*", re.DOTALL)
_SET = re.compile(rf"{_W}*({_KEY}){_W}+(in|notin){_W}*\(([^()]*)\){_W}*")
_EXISTS = re.compile(rf"{_W}*(!?){_W}*({_KEY}){_W}*")
_ORDERED = re.compile(rf"{_W}*({_KEY}){_W}*([<>]){_W}*(.*?){_W}*", re.DOTALL)
"""`key>N` and `key<N`: `labels.Parse` takes them where N is an int64 that is also a label value (digits, so
`-1` and `+1` are refused as values), and they hold for no runtime, whose labels are names."""
_INT64_MAX = 2**63 - 1
_MAX_SELECTOR_LENGTH = 1024


class SelectorError(ValueError):
    """The selector does not name exactly one runtime."""


class SelectorSyntaxError(SelectorError):
    """The selector is one kube-apiserver could not parse either (`labels.Parse`: a key no label can have, a
    value no label can hold, an operator it does not know): it refuses it while decoding the list options,
    before the field selector and before the metric's name is looked at. Refusals of what a parsed selector
    selects (an unknown label, no or several runtimes) are the provider's, after every option was decoded
    (`deployment_from_query`)."""


Requirement = tuple[str, str, frozenset[str]]
"""A requirement as apimachinery holds it: key, operator and values, the operator one of `in` (also `=` and
`==`), `notin` (also `!=`), `exists` (a key alone), `!` (`!key`, which holds where the label is absent), and `>`
or `<` with one integer (which parse, and select no runtime: `deployment_from_selector` refuses them)."""


class WatchAsked(Exception):
    """The query asks to watch (`negotiation.asks_to_watch`): there is no runtime to answer once. Found while the
    query is read for its selector, so that the HPA's query, read once and cached, is never looked at again."""


def _split_requirements(selector: str) -> list[str]:
    """Split on commas outside parentheses, as `k8s.io/apimachinery/pkg/labels` does."""
    if "(" not in selector:
        return selector.split(",")
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


SELECTOR_CACHE_SIZE = 65_536
"""Selectors whose answer is kept: one per runtime an HPA scales (its metrics share it), so a fleet of up to
65,536 runtimes never parses a selector twice; a bigger one only parses again. Two caches hold them: the
answer (`deployment_from_selector`) and that it parses (`refuse_unparseable_selector`, which also keeps one the
provider then refuses, `app=x`). Each entry is a selector of at most 1 KiB (longer ones are refused, and
refusals are not cached): some 75 MiB a cache at the very worst (measured: 74 and 78 MiB of 1 KiB selectors),
a few MiB for real selectors (`deployment=<name>`, under 100 bytes)."""


@functools.lru_cache(maxsize=SELECTOR_CACHE_SIZE)
def deployment_from_selector(selector: str | None) -> str:
    """The runtime Deployment the selector names. Cached (`SELECTOR_CACHE_SIZE`): an HPA sends the same
    selector every sync, and the answer depends on nothing else (refusals raise, so they are not cached)."""
    if selector is None or not selector.strip(BLANKS):
        raise SelectorError(f"missing labelSelector; {HELP}")
    requirements = parsed_requirements(selector)
    for key, operator, values in requirements:
        if "" in values and operator != "notin":  # `!=` and `notin` an empty value rule nothing out
            raise SelectorError(f"empty value for {key!r} in labelSelector; {HELP}")
        if key not in (SELECTOR_DEPLOYMENT, SELECTOR_SERVINGRUNTIME):
            raise SelectorError(f"unknown label {key!r}{_did_you_mean(key)} in labelSelector; {HELP}")
        if operator in ("<", ">"):
            raise SelectorError(f"requirement '{key}{operator}{min(values)}' in labelSelector selects no runtime: "
                                f"'<' and '>' compare numbers, and runtime labels are names; {HELP}")
    return runtime_selected(selector, requirements)


def parsed_requirements(selector: str) -> list[Requirement]:
    """The requirements of `selector`, or `SelectorSyntaxError` for the first that kube-apiserver could not parse
    either (or a selector over `_MAX_SELECTOR_LENGTH`): all of them are read before any is judged, as
    `labels.Parse` reads the whole selector before the provider looks at what it selects."""
    if len(selector) > _MAX_SELECTOR_LENGTH:
        raise SelectorSyntaxError(f"labelSelector is longer than {_MAX_SELECTOR_LENGTH} characters; {HELP}")
    requirements = []
    for text in _split_requirements(selector):
        key, operator, values = requirement = _requirement(text)
        _check_key(key)
        for value in sorted(values):  # the same one named each time a set holds several bad ones
            if value:  # an empty value parses: `deployment=` is the provider's to refuse (`deployment_from_selector`)
                _check_value(key, value)
            if operator in ("<", ">") and not (value.isascii() and value.isdigit() and int(value) <= _INT64_MAX):
                raise SelectorSyntaxError(f"unsupported requirement '{key}{operator}{value}' in labelSelector: '<' "
                                          f"and '>' take an integer (and select no runtime); {HELP}")
        requirements.append(requirement)
    return requirements


@functools.lru_cache(maxsize=SELECTOR_CACHE_SIZE)
def refuse_unparseable_selector(selector: str | None) -> None:
    """Raise `SelectorSyntaxError` where kube-apiserver's `labels.Parse` would refuse `selector` (the first
    `labelSelector` value, decoded; None where there is none); nothing otherwise, whatever it selects. Cached as
    `deployment_from_selector` is: a query too long for the query cache (`CACHED_QUERY_LENGTH`) is decoded at
    every request, and its selector would otherwise be parsed twice each time (refusals are not cached)."""
    if selector is not None and selector.strip(BLANKS):
        parsed_requirements(selector)


def _requirement(text: str) -> Requirement:
    """The requirement `text` states: `key=value`, `key==value`, `key!=value`, `key in (values)`, `key notin
    (values)`, `key`, `!key`, `key>N` or `key<N`. A set's values are a set, as apimachinery makes it, so `in
    (x,x)` is `x` alone and `in (a,b)` two runtimes; `()` is the empty value. Any other form (a stray token) is
    refused, quoted as sent (`repr`: a line break or a control character shows)."""
    if (equality := _EQUALITY.fullmatch(text)) is not None:
        operator = "notin" if equality.group(2) == "!=" else "in"
        return equality.group(1), operator, frozenset((equality.group(3),))
    if (in_set := _SET.fullmatch(text)) is not None:
        return in_set.group(1), in_set.group(2), frozenset(value.strip(BLANKS) for value in in_set.group(3).split(","))
    if (exists := _EXISTS.fullmatch(text)) is not None:
        return exists.group(2), "!" if exists.group(1) else "exists", frozenset()
    if (ordered := _ORDERED.fullmatch(text)) is not None:  # parses in Go; `parsed_requirements` checks the number
        return ordered.group(1), ordered.group(2), frozenset((ordered.group(3),))
    raise SelectorSyntaxError(f"unsupported requirement {text!r} in labelSelector (taken: key=value, key==value, "
                              f"key in (values), and to narrow those key!=value, key notin (values), key, !key); "
                              f"{HELP}")


def runtime_selected(selector: str, requirements: list[Requirement]) -> str:
    """The one runtime (its Deployment's name) that meets every requirement, as apimachinery's `Matches` would
    find it among the runtimes' labels (`names.runtime_labels`: `deployment`, and `servingruntime` where the name
    has the prefix). `in` names runtimes and the runtime must be named by each `in`; `notin` rules some out
    (and holds where the label is absent, so `servingruntime!=x` keeps a Deployment without the prefix); a key
    alone needs the label, `!key` its absence (every runtime has `deployment`; `servingruntime` is the prefix).
    Without any `in` the selector is met by every runtime but a few: it names none."""
    named: set[str] | None = None
    excluded: set[str] = set()
    prefixed = {True, False}  # which Deployment names may be selected: with the prefix, without it
    for key, operator, values in requirements:
        names = values if key == SELECTOR_DEPLOYMENT else {SERVINGRUNTIME_DEPLOYMENT_PREFIX + v for v in values}
        if operator == "in":
            named = set(names) if named is None else named & names
        elif operator == "notin":
            excluded |= names
        elif key == SELECTOR_SERVINGRUNTIME:
            prefixed &= {operator == "exists"}
        elif operator == "!":
            prefixed = set()  # no runtime lacks `deployment`
    if named is None and prefixed:
        raise SelectorError(f"labelSelector {selector!r} names no runtime: '!=', 'notin', a key alone and '!key' "
                            f"only narrow the runtimes that '=', '==' or 'in' name; {HELP}")
    chosen = {name for name in named or () if name not in excluded
              and name.startswith(SERVINGRUNTIME_DEPLOYMENT_PREFIX) in prefixed}
    if not chosen:
        raise SelectorError(f"labelSelector {selector!r} selects no runtime: every requirement must hold "
                            f"(Kubernetes ANDs them) and no runtime meets them all; {HELP}")
    if len(chosen) > 1:
        raise SelectorError(f"labelSelector {selector!r} names {len(chosen)} different runtimes; {HELP}")
    return chosen.pop()


_KEY_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
"""A label key's name part (after the prefix's `/`), as `_VALUE` but never empty."""
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
"""A label key's prefix (before its `/`): a DNS-1123 subdomain, lower case, up to 253 characters."""


def _check_key(key: str) -> None:
    """Refuse a key no label can have (apimachinery's `IsLabelKey`: `-app`, `a/b/c`, `Example.com/x`, a name of 64
    characters), as `labels.Parse` does before it reads the operator: a `SelectorSyntaxError`, where a key that
    could be a label but is not one the adapter reads is the provider's "unknown label"."""
    prefix, _, name = key.rpartition("/")
    if ("/" in prefix or _KEY_NAME.fullmatch(name) is None
            or ("/" in key and (len(prefix) > 253 or _DNS_SUBDOMAIN.fullmatch(prefix) is None))):
        raise SelectorSyntaxError(
            f"invalid label key {key!r} in labelSelector: a label key is a name of up to 63 characters, "
            "alphanumeric at both ends and '-', '_' or '.' inside, with an optional DNS subdomain prefix and '/' "
            f"(example.com/name); {HELP}")


def _check_value(key: str, value: str) -> None:
    """Refuse a non-empty value no label can hold, saying why in kube-apiserver's words (`deployment=-bad-` and
    a 64-character name read only "unsupported requirement"), before the provider asks whether the adapter reads
    its key."""
    if _VALUE.fullmatch(value) is None:
        problem = (f"must be no more than 63 characters, not {len(value)}" if len(value) > 63 else
                   "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                   "alphanumeric character")
        raise SelectorSyntaxError(f"invalid label value {value!r} for {key!r} in labelSelector: {problem}; {HELP}")


def _did_you_mean(key: str) -> str:
    """` (did you mean 'servingruntime'?)` for a key close to one the selector takes (another case, a plural, a
    typo), else ""."""
    keys = (SELECTOR_DEPLOYMENT, SELECTOR_SERVINGRUNTIME)
    close = [k for k in keys if k == key.lower()] or difflib.get_close_matches(key.lower(), keys, n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


CACHED_QUERY_LENGTH = 256
"""Query strings up to this long are cached by `deployment_from_query`: an HPA's (`labelSelector=deployment%3D`
and a name) is under 100 bytes, and a full cache of them holds at most 16 MiB. A longer one (any other
parameters, up to the request line's 8 KiB) is read each time, so that it cannot grow the cache past that."""


def deployment_from_query(raw_query: str) -> str:
    """`deployment_from_selector` of the `labelSelector` in a request's query string as sent (percent-encoded),
    read as aiohttp reads `request.query`; `list_options.BadListOption` or `SelectorSyntaxError` where
    kube-apiserver could not decode its list options (`limit=abc`, then a `labelSelector` it cannot parse, then a
    `fieldSelector`: `field_selector`), then `WatchAsked` where it asks to watch, whatever its key's escapes (a
    raw test for `watch` missed `%77atch`), and only then `SelectorError` for what a selector that parses
    selects. Cached by the whole string, so an HPA's request, the same every sync, parses neither its query nor
    its selector (a watch raises, so it is not cached)."""
    if len(raw_query) > CACHED_QUERY_LENGTH:
        return _deployment_from_query(raw_query)
    return cached_deployment_from_query(raw_query)


def _deployment_from_query(raw_query: str) -> str:
    query = URL.build(query_string=raw_query, encoded=True).query
    # In the order apiserver's list handler decodes `ListOptions` (url.Values to v1, then v1 to internal), before
    # it looks at `watch`, and the provider at the metric and at what the selector selects
    refuse_bad_list_options(query)
    selector = query.get("labelSelector")
    refuse_unparseable_selector(selector)
    refuse_bad_field_selector(query.get("fieldSelector"))
    if asks_to_watch(query):
        raise WatchAsked
    return deployment_from_selector(selector)


cached_deployment_from_query = functools.lru_cache(maxsize=SELECTOR_CACHE_SIZE)(_deployment_from_query)
"""`deployment_from_query` of a query string up to `CACHED_QUERY_LENGTH` long, cached: the HPA's handler calls it
directly (its length test inline), a Python call less on every request."""
