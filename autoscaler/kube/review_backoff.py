"""When a TokenReview or SubjectAccessReview that failed is tried again, as k8s.io/apiserver's delegated
authenticator and authorizer do (`DefaultAuthWebhookRetryBackoff` and `webhook.DefaultShouldRetry`).

One 429 from API Priority and Fairness, a 5xx or a connection the API server reset is usually gone half a second
later; answered at once, it became the HPA's `FailedGetExternalMetric` and a missed scale-up (the HPA asks every
15 s, past the 10 s decision cache, so nearly every read needs a review of its own). Five tries, the wait
growing from 500 ms by x1.5 with up to 20% added, never sooner than the server's `Retry-After`; all of them
inside the one deadline of the review (`autoscaler.kube.reviews.DEFAULT_TIMEOUT_S`), which bounds what a
request waits on it.
"""

from __future__ import annotations

from typing import Final

from autoscaler.kube.errors import KubeApiError

TRIES: Final = 5
FIRST_WAIT_S: Final = 0.5
GROWTH: Final = 1.5
JITTER: Final = 0.2


def worth_another_try(error: KubeApiError) -> bool:
    """No answer (a reset or refused connection), throttled (429) or failed on the server's side (5xx); a 4xx
    such as 401 or 403 is the answer itself. A little broader than kube's `DefaultShouldRetry` (500, 504, 429, a
    reset connection, anything with a Retry-After): a 502, a 503 without Retry-After or a refused connection
    (a restarting API server, an overloaded load balancer in front of it) passes as soon, and the tries stay
    within the review's one deadline."""
    return error.status is None or error.status == 429 or error.status >= 500


def wait_before_try(failed: int, draw: float, retry_after_s: float | None) -> float:
    """The wait after the `failed`-th failed try (from 1); `draw` uniform in [0, 1) spreads the retries of many
    requests that failed together."""
    wait = FIRST_WAIT_S * GROWTH ** (failed - 1) * (1.0 + JITTER * draw)
    return max(wait, retry_after_s or 0.0)
