"""The one layer over the Kubernetes API (`kubernetes.aio`): connection settings, one error hierarchy, raw
JSON calls, list + watch, patches, Leases and access reviews.

- `config`: where connection settings come from (`--kubeconfig`, in-cluster, default kubeconfig).
- `credentials`: a kubeconfig's `tokenFile` or exec-plugin token, fetched again when it changes or expires.
- `token_file`: a bearer token read again from its file whenever it changes (no library).
- `errors`: `KubeConfigError`, `KubeApiError` (status, reason, Retry-After), `WatchExpiredError`.
- `raw`: raw JSON reads for lists and watches; the API's error Status objects become `KubeApiError`.
- `list_watch`: `ListWatch`, one resource kept current by list + watch (resume, relist after 410, backoff).
- `watch_ends`: how each of its watches' ends is judged (very short, short-lived, stayed open), and the waits they set.
- `session`: `KubeSession`, the API client a group of loops shares, and those loops' tasks.
- `client`: typed writes: pod annotation merge patches and Lease get/create/replace.
- `reviews`: TokenReview, SubjectAccessReview and the authentication ConfigMap, over `review_connection`: the
  connection settings as plain data, so that the serving workers of `serve --workers N` never load the library.
- `backoff`: the capped, jittered exponential backoff every caller retries with.
- `retry_guard`: `RetryGuard`, an owner's backoff and failure handler kept from ending its retrying loop.
- `watch_health`: what those loops tell the adapter's metrics: each failure by its cause, whether a watch is open.
- `user_agent`: what every client calls itself (`modelmesh-autoscaler/VERSION (PART)`), for the audit log.

Library exceptions never leave this package. May import `autoscaler.model`, `autoscaler.names`,
`autoscaler.said_once` and `autoscaler.selfmetrics`; never `sources`, `api`, `actuation` or `policies`.
"""
