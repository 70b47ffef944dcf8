"""What a request asks for beyond its path, read as kube-apiserver reads it: the media types it accepts and
whether it asks to watch.

Clients written against Kubernetes act on apiserver's answers: a 406 names what it serves, where JSON sent to
a protobuf-only client would fail in its decoder; a 405 refuses a watch, where a plain list would leave
`kubectl get --raw '...&watch=true'` waiting on what it takes for a stream. Both are read per request on the
HPA's path, so each answer is kept by the header or query string that decided it.
"""

from __future__ import annotations

import functools

from yarl import URL

SERVED_MEDIA_TYPE = "application/json"
_TAKES_JSON = frozenset({SERVED_MEDIA_TYPE, "application/*", "*/*"})
NOT_ACCEPTABLE = f"only the following media types are accepted: {SERVED_MEDIA_TYPE}"
"""apimachinery's `errNotAcceptable` message, for the one type this server writes."""


@functools.lru_cache(maxsize=1024)
def accepts_json(accept: str) -> bool:
    """Whether an `Accept` header admits JSON: some clause's media range (before its parameters) is JSON,
    `application/*` or `*/*`. Weights are not read, as apimachinery's negotiation does not read them. Kept
    per header: clients send the same one each time; at most 1,024 are remembered (each at most 8 KiB,
    aiohttp's limit on a header)."""
    return any(clause.split(";", 1)[0].strip().lower() in _TAKES_JSON for clause in accept.split(","))


def asks_to_watch(raw_query: str) -> bool:
    """Whether a query string sets `watch` as Kubernetes reads a boolean parameter (its first value; any but
    empty, `0` and `false` in any case is true). Only called when `watch` appears in the string at all."""
    first = URL.build(query_string=raw_query, encoded=True).query.get("watch")
    return first is not None and first not in ("", "0") and first.lower() != "false"
