"""The serving path's own series, mixed into `AdapterMetrics` (`autoscaler.selfmetrics`): the API's requests, their
latency and the freshness of what they served, after custom-metrics-apiserver, and how authentication and
authorization fare (a rising `error` count means the Kubernetes API is failing the adapter's reviews: HPA requests
get errors). In `serve --workers N` a serving worker owns these and every other series is the refresh process's
(`autoscaler.api.selfmetrics_split.SERVING_ATTRIBUTES`). The requests' counts go through `AdapterMetrics.tally`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class ApiSeries:
    """The API's request series (`_add_request_series`) and the reviews' (`_add_review_series`), made apart so that
    `AdapterMetrics` keeps its order of series on `/metrics`."""

    registry: CollectorRegistry
    """`AdapterMetrics.registry`, which the series are made in."""

    def _add_request_series(self) -> None:
        self.requests = Counter(
            "modelmesh_autoscaler_api_requests_total",
            "API requests by route and HTTP status code.",
            ["path", "code"], registry=self.registry,
        )
        self.scaled_to_zero_answers = Counter(
            "modelmesh_autoscaler_api_scaled_to_zero_answers_total",
            "External metric and KEDA answers that were a 503 for a runtime scaled to zero (its Deployment asks for "
            "0 replicas): nothing is wrong; counted in api_requests_total too, and left out of the 503 alert.",
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "modelmesh_autoscaler_api_request_duration_seconds",
            "API request latency by route.",
            ["path"], registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
        )
        self.freshness = Histogram(
            "modelmesh_autoscaler_metric_freshness_seconds",
            "Age of the oldest sample behind each served value, at the time it was served.",
            registry=self.registry,
            buckets=(1, 5, 10, 15, 30, 45, 60, 120, 300),
        )

    def _add_review_series(self) -> None:
        self.authentications = Counter(
            "modelmesh_autoscaler_authentications_total",
            "Authentication outcomes of protected requests by method (requestheader, x509, token, none) and result "
            "(success, failure; error: a token whose TokenReview could not be made).",
            ["method", "result"], registry=self.registry,
        )
        self.authorizations = Counter(
            "modelmesh_autoscaler_authorization_decisions_total",
            "Authorization decisions by decision (allowed, denied, error) and whether the cache answered.",
            ["decision", "cached"], registry=self.registry,
        )
        self.kube_api_seconds = Histogram(
            "modelmesh_autoscaler_kube_api_request_duration_seconds",
            "Kubernetes API calls made for authentication and authorization, by call and outcome "
            "(ok, error, timeout).",
            ["call", "outcome"], registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
        )
