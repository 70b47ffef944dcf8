"""A fake Kubernetes API server that speaks the real wire format, shared by every test that needs one.

No kube-apiserver runs where the tests run, yet the adapter talks to one in several ways: it discovers runtime
Deployments and watches their pods, writes `pod-deletion-cost` annotations with merge patches, elects a leader
with a `coordination.k8s.io/v1` Lease, authorizes HPA requests with SubjectAccessReviews and reads the
aggregator's front-proxy settings from `kube-system/extension-apiserver-authentication`. This package is one
aiohttp server on 127.0.0.1 that answers those calls with the JSON the real server sends, so the real
`kubernetes` client, `kubernetes.aio` and `kubectl` can be pointed at it unchanged, and tests can break it on
purpose (failures, slow answers, expired watches, an outage). Tests import `FakeKubeApi` from here; scripts
run it as a process with `python -m tests.fakes.kube --port N --state FILE.yaml [--kubeconfig OUT]`.

Where things live (each module imports only those above it):

- `wire.py`: the wire format: `Status` objects and `ApiError`, label and field selectors, RFC 3339 times,
  JSON bodies and responses.
- `resources.py`: `ResourceType` and `RESOURCE_TYPES`, the one table of served kinds, and URL path parsing.
  Adding a kind starts (and often ends) with a row there.
- `discovery.py`: `/version`, `/api`, `/apis` and APIResourceLists, derived from the table.
- `patches.py`: merge patch (RFC 7386), strategic merge patch and JSON patch (RFC 6902).
- `faults.py`: recording of requests (`RecordedRequest`, `RecordedPatch`), injected failures and delays, RBAC
  denials (`forbid`), actions run when a request arrives (`on_request`).
- `leases.py`: how the server decodes and validates a Lease (MicroTime, int32 counts).
- `schemas.py`: a custom resource's CRD `openAPIV3Schema` (the adapter's RuntimeScale, from `manifests/base`):
  unknown fields pruned, invalid ones 422, on every write of the object, its `status` and its `scale`.
- `workloads.py`: what the kubelet and controllers would write (pod conditions, Deployment status) and pod
  validation of the deletion cost.
- `store.py`: `ObjectStore`: objects, the resourceVersion counter, event history, watchers, list and watch.
- `writes.py`: `ObjectWrites`: POST / PUT / PATCH with preconditions, status subresource and validation.
- `reviews.py`: `AuthReviews`: bearer tokens, TokenReview, SubjectAccessReview with `AccessRule`s, the
  authentication ConfigMap.
- `subresources.py`: `Subresources`: the `status` and `scale` (autoscaling/v1 `Scale`) subresources.
- `cluster.py`: `ClusterControls`: test controls for Deployments, pods and ModelMesh runtimes.
- `kserve.py`: `KServeControls`: test controls for ServingRuntimes, ClusterServingRuntimes, RuntimeScales.
- `server.py`: `FakeKubeApi` (the mixins above put together), lifecycle, TLS, middleware, routing, process
  mode and `main`.

Kept as the real server does it (checked against kubernetes/apiserver sources):

- Errors are `Status` objects (`kind: Status, apiVersion: v1, metadata: {}, status: Failure, message, reason,
  code, details`) with the real reasons and messages: NotFound, AlreadyExists, Conflict ("the object has been
  modified; ..."), Invalid (422, "X is invalid: field: Invalid value: ...: detail"), Expired (410),
  UnsupportedMediaType (415), TooManyRequests (429 with `Retry-After` and `details.retryAfterSeconds`),
  ServiceUnavailable (503, with `Retry-After` only where given: an API server shutting down).
- One resourceVersion counter for all objects, like etcd's revision. Lists carry it in `metadata`; list items
  carry no `kind`/`apiVersion`; single objects and watch events do. Empty `labels`/`annotations` are omitted.
- Watches stream JSON lines `{"type": ..., "object": ...}` (HTTP 200, chunked): resourceVersion ""/"0"/absent
  sends synthetic ADDED events for the current state first; a version sends every later event; a version older
  than the retained history gets one ERROR event carrying a 410 `Expired` Status ("too old resource version:
  R (oldest)") and the stream ends. A label-selected watcher sees an object that stops matching as DELETED and
  one that starts matching as ADDED. BOOKMARKs only when `allowWatchBookmarks` is set. `timeoutSeconds` ends
  the stream cleanly. `watch` is parsed like the server's bool conversion: anything but "", "0", "false"
  (any case) is true, so `kubernetes_asyncio`'s `watch=True` works.
- Field selectors only on the fields each kind's conversion takes (pods: `spec.nodeName`, `status.phase`,
  `status.podIP`, ...; Deployments, Leases and other built-ins without one: `metadata.name`/`namespace`; custom
  resources: the same, "field label not supported"), else 400 with the server's message. List options are
  validated as `ValidateListOptions` does (422): `resourceVersionMatch` without `resourceVersion`, on a watch
  without `sendInitialEvents`, `sendInitialEvents` on a list.
- PATCH accepts `application/merge-patch+json` (RFC 7386), `application/strategic-merge-patch+json` and
  `application/json-patch+json` (RFC 6902); anything else is 415. Custom resources (and their `status` and
  `scale`) take no strategic merge patch (415, as apiextensions-apiserver answers `kubectl patch` without
  `--type`). A `metadata.resourceVersion` in the patch is a
  precondition (409 when stale). Writes to the main resource keep `status` (it is a subresource). A no-op
  write does not bump resourceVersion and emits no event. `controller.kubernetes.io/pod-deletion-cost` must
  parse as a 32-bit integer (422), and annotation values must be strings (400), as in pod validation.
- Leases: `acquireTime`/`renewTime` must be MicroTime with exactly six fractional digits and integer counts
  (else 400, as decoding fails), a duration above 0 and transitions of at least 0 (else 422): `leases.py`.
  PUT with a stale resourceVersion is 409 Conflict, PUT without one is 422 (leases do not allow
  unconditional updates), PUT of a missing Lease creates it, POST of an existing name is 409 AlreadyExists.
- Authentication: once `write_kubeconfig` handed out credentials, a request without an `Authorization` header
  is `system:anonymous`, as kube-apiserver's default `--anonymous-auth` takes it: RBAC's 403 Forbidden naming
  that user, but for the health endpoints and /version (`anonymous_auth = False`: 401 Unauthorized, as with
  `--anonymous-auth=false`); kubectl over plain http is let through (client-go sends credentials only over
  TLS). `require_token` refuses anything but that token (or one in `tokens`) with 401. Clients built by hand
  send a bearer token in tests that write a kubeconfig: `kube.client_configuration()` for a `kubernetes.aio`
  client, an `Authorization` header for an `aiohttp` session standing in for the HPA controller.
- SubjectAccessReview and TokenReview are validated like the server does and echoed with a `status`; creation
  answers 201. An unknown token gets `status: {user: {}, error: ...}`: `authenticated` is omitted, as Go's
  `omitempty` drops a false bool. Authenticated users get the `system:authenticated` group added.
- `/version`, `/api`, `/apis` and per-group-version APIResourceLists, enough for `kubectl get`.
- Custom resources: KServe's `servingruntimes` and `clusterservingruntimes` (no subresources, as
  modelmesh-serving installs them) and the adapter's `runtimescales` with `status` and `scale`: GET/PUT/PATCH
  of `autoscaling/v1` `Scale`, 500 when the spec replicas path is empty (see `subresources.py`).

Not modelled: admission, defaulting beyond what tests read, KServe's CRD schemas (ServingRuntimes are stored as
given), CEL validation rules, server-side apply (415), protobuf, managed fields,
pagination (`limit` is ignored: allowed by the API), graceful deletion through the API (DELETE removes at once:
there is no kubelet; `delete_pod(..., graceful=True)` shows a terminating pod instead), subresources other than
`status` and `scale` (404).
Strategic merge knows the merge keys of the lists tests touch (containers, conditions, ...); other lists are
replaced.

Forcing a client through the 410 path: `kube.end_watches(); <some change>; kube.compact()`: the client resumes
from a version that is no longer retained. Watches cut at once (a proxy that cuts streams, an API server shutting
down): `kube.cut_watches = True; kube.end_watches()`. Streams broken after their first events (a proxy
that cuts every stream after its first bytes): `kube.drop_watches_after = 1; kube.end_watches()`.
"""

from tests.fakes.kube.faults import Delay, Fault, Forbidden, RecordedPatch, RecordedRequest, Trigger
from tests.fakes.kube.patches import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from tests.fakes.kube.resources import (
    CLUSTER_SERVING_RUNTIMES,
    CONFIGMAPS,
    DEPLOYMENTS,
    LEASES,
    PODS,
    RESOURCE_TYPES,
    RUNTIME_SCALES,
    SERVING_RUNTIMES,
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    ResourceType,
)
from tests.fakes.kube.reviews import AUTH_CONFIGMAP, AccessRule, Authorizer
from tests.fakes.kube.server import FakeKubeApi, main
from tests.fakes.kube.wire import JSON, ApiError, parse_field_selector, parse_label_selector, status_object
from tests.fakes.kube.workloads import POD_DELETION_COST

__all__ = [
    "AUTH_CONFIGMAP",
    "CLUSTER_SERVING_RUNTIMES",
    "CONFIGMAPS",
    "DEPLOYMENTS",
    "JSON",
    "JSON_PATCH",
    "LEASES",
    "MERGE_PATCH",
    "PODS",
    "POD_DELETION_COST",
    "RESOURCE_TYPES",
    "RUNTIME_SCALES",
    "SERVING_RUNTIMES",
    "STRATEGIC_MERGE_PATCH",
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "AccessRule",
    "ApiError",
    "Authorizer",
    "Delay",
    "FakeKubeApi",
    "Fault",
    "Forbidden",
    "RecordedPatch",
    "RecordedRequest",
    "ResourceType",
    "Trigger",
    "json_patch",
    "main",
    "merge_patch",
    "parse_field_selector",
    "parse_label_selector",
    "status_object",
    "strategic_merge_patch",
]
