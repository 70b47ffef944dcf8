"""Reading the runtime out of the HPA's `labelSelector` (docs/design.md, What the adapter serves).

The HPA sends `metric.selector` as a label selector string. It must name exactly one runtime, by
`deployment=<name>` or `servingruntime=<name>`; `==` and a one-value `in (...)` mean the same. Anything else
is answered with a 400 that says what to write instead.
"""

from __future__ import annotations

import difflib
import functools
import re

from yarl import URL

from autoscaler.api.negotiation import asks_to_watch
from autoscaler.names import SELECTOR_DEPLOYMENT, SELECTOR_SERVINGRUNTIME, SERVINGRUNTIME_DEPLOYMENT_PREFIX

HELP = (
    f"labelSelector must name one runtime: '{SELECTOR_DEPLOYMENT}=<Deployment name>' or "
    f"'{SELECTOR_SERVINGRUNTIME}=<ServingRuntime name>'"
)
# A label value: empty or up to 63 characters, alphanumeric at both ends, '-', '_', '.' inside.
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
# Whitespace is blanks and tabs only, and the whole requirement must match (`fullmatch`, not `$`, which also
# matches before a final newline): `deployment=x\n` is refused, not read as `deployment=x`.
_EQUALITY = re.compile(rf"[ \t]*([A-Za-z0-9./_-]+)[ \t]*(==|=)[ \t]*({_VALUE})[ \t]*")
_IN = re.compile(rf"[ \t]*([A-Za-z0-9./_-]+)[ \t]+in[ \t]*\([ \t]*({_VALUE})[ \t]*\)[ \t]*")
_MAX_SELECTOR_LENGTH = 1024


class SelectorError(ValueError):
    """The selector does not name exactly one runtime."""


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
65,536 runtimes never parses a selector twice; a bigger one only parses again. Each entry is a selector of at
most 1 KiB (longer ones are refused, and refusals are not cached) and a name: 70 MiB at the very worst, a
few MiB for real selectors (`deployment=<name>`, under 100 bytes)."""


@functools.lru_cache(maxsize=SELECTOR_CACHE_SIZE)
def deployment_from_selector(selector: str | None) -> str:
    """The runtime Deployment the selector names. Cached (`SELECTOR_CACHE_SIZE`): an HPA sends the same
    selector every sync, and the answer depends on nothing else (refusals raise, so they are not cached)."""
    if selector is None or not selector.strip():
        raise SelectorError(f"missing labelSelector; {HELP}")
    if len(selector) > _MAX_SELECTOR_LENGTH:
        raise SelectorError(f"labelSelector is longer than {_MAX_SELECTOR_LENGTH} characters; {HELP}")
    deployments: set[str] = set()
    for requirement in _split_requirements(selector):
        match = _EQUALITY.fullmatch(requirement) or _IN.fullmatch(requirement)
        if match is None:
            raise SelectorError(f"{_unsupported(requirement)}; {HELP}")
        key, value = match.group(1), match.group(match.lastindex or 2)
        if not value:
            raise SelectorError(f"empty value for {key!r} in labelSelector; {HELP}")
        if key == SELECTOR_DEPLOYMENT:
            deployments.add(value)
        elif key == SELECTOR_SERVINGRUNTIME:
            deployments.add(SERVINGRUNTIME_DEPLOYMENT_PREFIX + value)
        else:
            raise SelectorError(f"unknown label {key!r}{_did_you_mean(key)} in labelSelector; {HELP}")
    if len(deployments) != 1:
        raise SelectorError(f"labelSelector names {len(deployments)} different runtimes; {HELP}")
    return deployments.pop()


_LOOSE_EQUALITY = re.compile(r"[ \t]*([A-Za-z0-9./_-]+)[ \t]*(==|=|!=)[ \t]*(.*?)[ \t]*")


def _unsupported(requirement: str) -> str:
    """Why a requirement is refused: for `key=value` whose value no label can hold, what is wrong with it, in
    kube-apiserver's words (`deployment=-bad-` and a 64-character name read only "unsupported requirement");
    else the forms taken."""
    loose = _LOOSE_EQUALITY.fullmatch(requirement)
    if loose is not None and loose.group(2) != "!=":
        key, value = loose.group(1), loose.group(3)
        if not value:
            return f"empty value for {key!r} in labelSelector"
        problem = (f"must be no more than 63 characters, not {len(value)}" if len(value) > 63 else
                   "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                   "alphanumeric character")
        return f"invalid label value {value!r} for {key!r} in labelSelector: {problem}"
    return (f"unsupported requirement {requirement.strip()!r} in labelSelector (taken: key=value, key==value, "
            "key in (value))")


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
    read as aiohttp reads `request.query`; `WatchAsked` where it asks to watch, whatever its key's escapes
    (a raw test for `watch` missed `%77atch`). Cached by the whole string, so an HPA's request, the same every
    sync, parses neither its query nor its selector (a watch raises, so it is not cached)."""
    if len(raw_query) > CACHED_QUERY_LENGTH:
        return _deployment_from_query(raw_query)
    return cached_deployment_from_query(raw_query)


def _deployment_from_query(raw_query: str) -> str:
    query = URL.build(query_string=raw_query, encoded=True).query
    if asks_to_watch(query):
        raise WatchAsked
    return deployment_from_selector(query.get("labelSelector"))


cached_deployment_from_query = functools.lru_cache(maxsize=SELECTOR_CACHE_SIZE)(_deployment_from_query)
"""`deployment_from_query` of a query string up to `CACHED_QUERY_LENGTH` long, cached: the HPA's handler calls it
directly (its length test inline), a Python call less on every request."""
