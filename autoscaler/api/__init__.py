"""The aggregated API server for `external.metrics.k8s.io/v1beta1`: discovery documents, the external
metrics, the KEDA and debug endpoints, `Status` errors, TLS, authentication and authorization.

Handlers only read what the refresh loop decided; they never wait on a source. May import `kube` (reviews),
`model`, `names`, `selfmetrics`, `settings`, `refresher`; never `sources` or `actuation`.
"""
