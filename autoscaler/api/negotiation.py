"""What a request asks for beyond its path, read as kube-apiserver reads it: the media types it accepts and
whether it asks to watch.

Clients written against Kubernetes act on apiserver's answers: a 406 names what it serves, where JSON sent to
a protobuf-only client would fail in its decoder; a 405 refuses a watch, where a plain list would leave
`kubectl get --raw '...&watch=true'` waiting on what it takes for a stream. Both are read per request on the
HPA's path, so each answer is kept by the header or query string that decided it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

SERVED_MEDIA_TYPE = "application/json"
_TAKES_JSON = frozenset({SERVED_MEDIA_TYPE, "application/*", "*/*"})
NOT_ACCEPTABLE = f"only the following media types are accepted: {SERVED_MEDIA_TYPE}"
"""apimachinery's `errNotAcceptable` message, for the one type this server writes."""


@functools.lru_cache(maxsize=1024)
def accepts_json(accept: str) -> bool:
    """Whether an `Accept` header admits the JSON this server writes: some clause's media range (before its
    parameters) is JSON, `application/*` or `*/*`, and the clause asks for no conversion (`as=Table`, kubectl's
    tables; `as=APIGroupDiscoveryList`, aggregated discovery): apimachinery passes over a clause whose `as` the
    endpoint does not convert to, and this server converts to none, so a client that asks for a Table alone gets
    406 rather than a list it would read as a Table (kubectl names plain JSON after its Table clauses, and gets
    JSON). Weights are not read, as apimachinery's negotiation does not read them. Kept per header: clients
    send the same one each time; at most 1,024 are remembered (each at most 8 KiB, aiohttp's limit on a
    header)."""
    return any(_plain_json(clause) for clause in accept.split(","))


def _plain_json(clause: str) -> bool:
    media_range, *parameters = clause.split(";")
    return (media_range.strip().lower() in _TAKES_JSON
            and not any(parameter.split("=", 1)[0].strip().lower() == "as" for parameter in parameters))


def asks_to_watch(query: Mapping[str, str]) -> bool:
    """Whether a parsed query (keys and values decoded: `%77atch` is `watch`, as Go's `url.ParseQuery` reads it)
    sets `watch` as Kubernetes reads a boolean parameter (apimachinery's `Convert_Slice_string_To_bool`, and
    apiserver's `RequestInfoFactory` deciding the verb): its first value; any but `0` and `false` in any case is
    true, the empty value of `?watch=` and of a bare `?watch` too. Only a query without `watch` lists."""
    first = query.get("watch")
    return first is not None and first != "0" and first.lower() != "false"
