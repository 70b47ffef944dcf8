"""Object storage, resource versions and watch events: the part of the fake that plays etcd and the watch cache.

`ObjectStore` keeps every object untyped (no kind/apiVersion) under (namespace, name), with one
resourceVersion counter for all types like etcd's revision. Every change, whether it comes through HTTP or a
test control, goes through `_create`, `_replace` or `_delete`, which bump the version, keep a bounded history
and fan the event out to open watches, so both paths look the same to a watching client. `_render` turns a
stored object into what the server sends.

Lists and watches are served here too (`_list`, `_watch`), because both read the store and the history under
the same rule: nothing may happen between reading the state and registering a watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from aiohttp import web

from tests.fakes.kube.faults import RECORD
from tests.fakes.kube.resources import DEPLOYMENTS, PODS, RESOURCE_TYPES, ResourceType, resource_type
from tests.fakes.kube.wire import (
    JSON,
    ApiError,
    FieldRequirement,
    LabelRequirement,
    check_list_options,
    field_value,
    json_copy,
    parse_field_selector,
    parse_label_selector,
    rfc3339,
    status_object,
    truthy,
)
from tests.fakes.kube.workloads import deployment_status

ObjectKey = tuple[str, str]
"""(namespace, name); the namespace is "" for cluster-scoped types."""

FIRST_RESOURCE_VERSION: Final = 1000
HISTORY_LIMIT: Final = 10_000
"""Events kept for watches that resume from a resourceVersion; older ones are compacted away (410)."""
_NAME_SUFFIX_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True, slots=True)
class Event:
    """One change, as kept in the history and fanned out to watchers."""

    resource_version: int
    rtype: ResourceType
    type: str  # ADDED, MODIFIED, DELETED
    obj: JSON  # rendered, with kind and apiVersion
    old: JSON | None


class WatchEnd:
    """Queue sentinel: finish the stream (`abort`: drop the connection like a dying server)."""

    def __init__(self, abort: bool) -> None:
        self.abort = abort


@dataclass(eq=False)
class Watcher:
    """One open watch (or the filter of one list): which objects it selects and the lines still to send."""

    rtype: ResourceType
    namespace: str | None
    labels: list[LabelRequirement]
    fields: list[FieldRequirement]
    bookmarks: bool
    queue: asyncio.Queue[JSON | WatchEnd] = field(default_factory=asyncio.Queue)

    @classmethod
    def for_request(cls, request: web.Request, rtype: ResourceType, namespace: str | None, *, watch: bool) -> Watcher:
        """The selectors and bookmark choice of a list or watch request's query, refused (422, 400) where the
        server refuses them."""
        check_list_options(request.query, watch)
        return cls(
            rtype,
            namespace,
            parse_label_selector(request.query.get("labelSelector")),
            parse_field_selector(request.query.get("fieldSelector"), rtype),
            bookmarks=truthy(request.query.get("allowWatchBookmarks")),
        )

    def matches(self, obj: JSON) -> bool:
        metadata = obj.get("metadata") or {}
        if self.namespace is not None and metadata.get("namespace") != self.namespace:
            return False
        labels = metadata.get("labels") or {}
        if not all(requirement.matches(labels) for requirement in self.labels):
            return False
        return all((field_value(obj, path) == value) != negate for path, negate, value in self.fields)

    def translate(self, event: Event) -> JSON | None:
        """What this watcher sees of a change: selectors turn edges into ADDED / DELETED."""
        if event.type == "ADDED":
            return {"type": "ADDED", "object": event.obj} if self.matches(event.obj) else None
        if event.type == "DELETED":
            return {"type": "DELETED", "object": event.obj} if self.matches(event.obj) else None
        was = event.old is not None and self.matches(event.old)
        now = self.matches(event.obj)
        if was and now:
            return {"type": "MODIFIED", "object": event.obj}
        if was:
            return {"type": "DELETED", "object": event.obj}
        if now:
            return {"type": "ADDED", "object": event.obj}
        return None


class ObjectStore:
    """Objects of every type in `resources.RESOURCE_TYPES`, their history and the open watches.

    The public methods are test controls: synchronous, to be called from the loop the server runs on."""

    def __init__(self) -> None:
        super().__init__()
        self.clock: Callable[[], float] = time.time
        """Where creation and transition timestamps come from."""
        self._objects: dict[ResourceType, dict[ObjectKey, JSON]] = {t: {} for t in RESOURCE_TYPES}
        self._resource_version = FIRST_RESOURCE_VERSION
        self._history: list[Event] = []
        self._compacted = FIRST_RESOURCE_VERSION
        self._watchers: set[Watcher] = set()
        # Pods by (namespace, label) -> label value, built when a Deployment's status is rendered and dropped at
        # any pod event: counting a Deployment's pods by scanning every pod made a list of 1,000 Deployments
        # with 2,000 pods take 12 s.
        self._pod_index: dict[tuple[str, str], dict[str | None, list[JSON]]] = {}
        self._name_counter = itertools.count(1)
        self.cut_watches = False
        """While True every watch ends cleanly right after its first events, as streams do through a proxy that
        cuts them or from an API server shutting down; `end_watches()` ends the ones open now."""
        self.drop_watches_after: int | None = None
        """While set, every watch stream is dropped (its connection aborted) as soon as it has sent that many
        events: a proxy that breaks each stream after its first bytes; `end_watches()` ends the ones open now."""

    # ---- test controls: objects ------------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        return str(self._resource_version)

    def get(self, resource: str, namespace: str, name: str) -> JSON | None:
        """A copy of a stored object as a GET would return it, or None."""
        rtype = resource_type(resource)
        obj = self._objects[rtype].get((namespace, name))
        return None if obj is None else self._render(rtype, obj)

    def stored(self, resource: str, namespace: str, name: str) -> JSON:
        """Like `get`, for a test that expects the object to exist: a missing one fails with its name."""
        obj = self.get(resource, namespace, name)
        if obj is None:
            raise AssertionError(f"no {resource} {namespace}/{name} in the fake API server")
        return obj

    def objects(self, resource: str, namespace: str | None = None) -> list[JSON]:
        """Copies of the stored objects of one resource (plural, kind or short name), in key order."""
        rtype = resource_type(resource)
        return [
            self._render(rtype, obj)
            for (ns, _), obj in sorted(self._objects[rtype].items())
            if namespace is None or ns == namespace
        ]

    def changes(self, resource: str, after: str | int = FIRST_RESOURCE_VERSION) -> list[JSON]:
        """The objects of one resource as each change after resourceVersion `after` left them, oldest first: what
        a watch from `after` would send, every client's writes included, for a test that plays the watch's
        delivery itself (as late as it likes)."""
        rtype = resource_type(resource)
        return [json_copy(event.obj) for event in self._history
                if event.rtype is rtype and event.resource_version > int(after)]

    def put_object(self, resource: str, obj: JSON) -> JSON:
        """Store any object as given (create or replace), with server-set metadata, emitting the event."""
        rtype = resource_type(resource)
        metadata = obj.setdefault("metadata", {})
        key = (metadata.get("namespace", "") if rtype.namespaced else "", metadata["name"])
        if rtype.namespaced:
            metadata["namespace"] = key[0]
        old = self._objects[rtype].get(key)
        if old is None:
            return self._create(rtype, obj)
        return self._replace(rtype, key, old, obj)

    def update_object(self, resource: str, namespace: str, name: str, mutate: Callable[[JSON], None]) -> JSON:
        """Change a stored object in place through `mutate`; emits MODIFIED unless nothing changed."""
        rtype = resource_type(resource)
        key = (namespace, name)
        old = self._objects[rtype].get(key)
        if old is None:
            raise KeyError(f"{rtype.qualified} {namespace}/{name}")
        new = json_copy(old)
        mutate(new)
        return self._replace(rtype, key, old, new)

    def delete_object(self, resource: str, namespace: str, name: str) -> JSON:
        rtype = resource_type(resource)
        return self._delete(rtype, (namespace, name))

    # ---- test controls: watches ----------------------------------------------------------------------------

    def end_watches(self, abort: bool = False) -> None:
        """End every open watch stream now: cleanly (like `timeoutSeconds`) or by dropping the connection."""
        for watcher in self._watchers:
            watcher.queue.put_nowait(WatchEnd(abort))
        self._watchers.clear()

    def compact(self) -> None:
        """Forget the event history: a watch from any older resourceVersion now gets a 410 Expired ERROR."""
        self._history.clear()
        self._compacted = self._resource_version

    def send_bookmarks(self) -> None:
        """Send a BOOKMARK with the current resourceVersion to every watcher that allowed bookmarks."""
        for watcher in self._watchers:
            if watcher.bookmarks:
                obj = {
                    "kind": watcher.rtype.kind,
                    "apiVersion": watcher.rtype.api_version,
                    "metadata": {"resourceVersion": str(self._resource_version), "creationTimestamp": None},
                }
                watcher.queue.put_nowait({"type": "BOOKMARK", "object": obj})

    def watch_count(self, resource: str | None = None) -> int:
        """Open watch streams, optionally of one resource (plural)."""
        return sum(1 for w in self._watchers if resource is None or w.rtype.plural == resource)

    async def wait_for_watches(self, count: int, resource: str | None = None, timeout: float = 5.0) -> None:
        """Wait until at least `count` watches are open: the ready signal for a client's watch loop."""
        async with asyncio.timeout(timeout):
            while self.watch_count(resource) < count:
                await asyncio.sleep(0.01)

    # ---- internals: writes and events ------------------------------------------------------------------------

    def _suffix(self) -> str:
        """Five characters for `generateName` and ReplicaSet-style pod names, deterministic per server."""
        number = next(self._name_counter) * 7919
        letters = []
        for _ in range(5):
            number, index = divmod(number, len(_NAME_SUFFIX_ALPHABET))
            letters.append(_NAME_SUFFIX_ALPHABET[index])
        return "".join(letters)

    def _bump(self) -> str:
        self._resource_version += 1
        return str(self._resource_version)

    def _render(self, rtype: ResourceType, obj: JSON, typed: bool = True) -> JSON:
        """The object as the server serializes it: typed (kind, apiVersion) unless it is a list item."""
        rendered: JSON = {"kind": rtype.kind, "apiVersion": rtype.api_version} if typed else {}
        body = json_copy(obj)
        metadata = body.get("metadata", {})
        for key in ("labels", "annotations"):
            if key in metadata and not metadata[key]:
                del metadata[key]
        if rtype is DEPLOYMENTS:
            body["status"] = deployment_status(body, self._candidate_pods(body))
        rendered.update(body)
        return rendered

    def _candidate_pods(self, deployment: JSON) -> list[JSON]:
        """The fewest pods of the Deployment's namespace that have one of its `matchLabels` (`deployment_status`
        checks the rest); every pod of the namespace when it has none."""
        namespace = deployment["metadata"]["namespace"]
        match_labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if not match_labels:
            return [pod for (ns, _), pod in self._objects[PODS].items() if ns == namespace]
        return min((self._pods_by(namespace, label).get(value, []) for label, value in match_labels.items()), key=len)

    def _pods_by(self, namespace: str, label: str) -> dict[str | None, list[JSON]]:
        by_value = self._pod_index.get((namespace, label))
        if by_value is None:
            by_value = self._pod_index[namespace, label] = {}
            for (ns, _), pod in self._objects[PODS].items():
                if ns == namespace:
                    by_value.setdefault((pod["metadata"].get("labels") or {}).get(label), []).append(pod)
        return by_value

    def _create(self, rtype: ResourceType, obj: JSON, created_at: float | None = None) -> JSON:
        metadata = obj.setdefault("metadata", {})
        namespace = metadata.get("namespace", "") if rtype.namespaced else ""
        key = (namespace, metadata["name"])
        if key in self._objects[rtype]:
            raise ApiError.already_exists(rtype, metadata["name"])
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = rfc3339(created_at if created_at is not None else self.clock())
        metadata["resourceVersion"] = self._bump()
        metadata.pop("deletionTimestamp", None)
        if rtype.tracks_generation:
            metadata["generation"] = 1
        stored = json_copy(obj)
        self._objects[rtype][key] = stored
        self._emit(rtype, "ADDED", stored, None)
        return self._render(rtype, stored)

    def _replace(self, rtype: ResourceType, key: ObjectKey, old: JSON, new: JSON) -> JSON:
        """Store `new` over `old` keeping server-owned metadata; no write (and no event) when nothing changed."""
        new = json_copy(new)
        metadata = new.setdefault("metadata", {})
        for owned in ("name", "namespace", "uid", "creationTimestamp", "generation"):
            if owned in old["metadata"]:
                metadata[owned] = old["metadata"][owned]
        metadata["resourceVersion"] = old["metadata"]["resourceVersion"]
        if _normalized(new) == _normalized(old):
            return self._render(rtype, old)
        if rtype.tracks_generation and new.get("spec") != old.get("spec"):
            metadata["generation"] = old["metadata"].get("generation", 1) + 1
        metadata["resourceVersion"] = self._bump()
        self._objects[rtype][key] = new
        self._emit(rtype, "MODIFIED", new, old)
        return self._render(rtype, new)

    def _delete(self, rtype: ResourceType, key: ObjectKey) -> JSON:
        old = self._objects[rtype].pop(key, None)
        if old is None:
            raise ApiError.not_found(rtype, key[1])
        final = json_copy(old)
        final["metadata"]["resourceVersion"] = self._bump()
        self._emit(rtype, "DELETED", final, old)
        return self._render(rtype, final)

    def _emit(self, rtype: ResourceType, event_type: str, obj: JSON, old: JSON | None) -> None:
        if rtype is PODS:
            self._pod_index.clear()
        event = Event(
            int(obj["metadata"]["resourceVersion"]),
            rtype,
            event_type,
            self._render(rtype, obj),
            self._render(rtype, old) if old is not None else None,
        )
        self._history.append(event)
        if len(self._history) > HISTORY_LIMIT:
            dropped = self._history.pop(0)
            self._compacted = dropped.resource_version
        for watcher in self._watchers:
            if watcher.rtype is rtype and (line := watcher.translate(event)) is not None:
                watcher.queue.put_nowait(line)

    # ---- internals: list and watch over HTTP -----------------------------------------------------------------

    def _list(self, rtype: ResourceType, namespace: str | None, request: web.Request) -> JSON:
        selection = Watcher.for_request(request, rtype, namespace, watch=False)
        items = [
            self._render(rtype, obj, typed=False)
            for _, obj in sorted(self._objects[rtype].items())
            if selection.matches(obj)
        ]
        return {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version,
            "metadata": {"resourceVersion": str(self._resource_version)},
            "items": items,
        }

    async def _watch(self, request: web.Request, rtype: ResourceType, namespace: str | None) -> web.StreamResponse:
        watcher = Watcher.for_request(request, rtype, namespace, watch=True)
        timeout_text = request.query.get("timeoutSeconds")
        timeout = float(timeout_text) if timeout_text else None
        version_text = request.query.get("resourceVersion", "")
        # Everything up to registering the watcher runs without awaiting, so no event can fall in between.
        initial: list[JSON] = []
        expired = False
        if version_text in ("", "0"):
            initial = [
                {"type": "ADDED", "object": self._render(rtype, obj)}
                for _, obj in sorted(self._objects[rtype].items())
                if watcher.matches(obj)
            ]
        else:
            try:
                since = int(version_text)
            except ValueError:
                raise ApiError.bad_request(f'invalid resource version "{version_text}"') from None
            if since < self._compacted:
                expired = True
                message = f"too old resource version: {since} ({self._compacted})"
                initial = [{"type": "ERROR", "object": status_object(410, message, "Expired")}]
            else:
                initial = [
                    line
                    for event in self._history
                    if event.rtype is rtype
                    and event.resource_version > since
                    and (line := watcher.translate(event)) is not None
                ]
        cut = expired or self.cut_watches
        if not cut:
            self._watchers.add(watcher)
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        drop_after = self.drop_watches_after
        sent = 0
        try:
            await response.prepare(request)
            request[RECORD].status = response.status
            for line in initial:
                await response.write(json.dumps(line).encode() + b"\n")
                sent = request[RECORD].events = sent + 1
                if drop_after is not None and sent >= drop_after:
                    return _dropped(request, response)
            if cut:
                await response.write_eof()
                return response
            async with asyncio.timeout(timeout):
                while True:
                    item = await watcher.queue.get()
                    if isinstance(item, WatchEnd):
                        if item.abort:
                            return _dropped(request, response)
                        break
                    await response.write(json.dumps(item).encode() + b"\n")
                    sent = request[RECORD].events = sent + 1
                    if drop_after is not None and sent >= drop_after:
                        return _dropped(request, response)
        except TimeoutError:
            pass
        except ConnectionError:
            return response
        finally:
            self._watchers.discard(watcher)
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response


def _dropped(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """Drop a watch's connection mid-stream, as a dying server or a cutting proxy does: the client reads a broken
    stream, not its end."""
    if request.transport is not None:
        request.transport.abort()
    return response


def _normalized(obj: JSON) -> JSON:
    """The object without its resourceVersion and empty maps, to detect no-op writes."""
    clone: JSON = json_copy(obj)
    metadata = clone.get("metadata", {})
    metadata.pop("resourceVersion", None)
    for key in ("labels", "annotations"):
        if key in metadata and not metadata[key]:
            del metadata[key]
    return clone
