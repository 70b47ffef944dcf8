"""Every counter of the adapter that a shipped alert reads with rate(), increase() or changes() is on a fresh
adapter's /metrics at 0, for each label value the alert selects, before anything happened.

prometheus_client creates a labelled series at its first `.labels(...)`, at the value of that first increment,
and Prometheus sees no increase in a series that first appears at 1: the first refusal of a replica is lost.
`ModelMeshDeletionCostPatchesFailing` ("refused for 10 minutes") then fired a 5-minute retry later, and never
where the refusals were one pass's (the pods deleted after). The adapter is the one `serve` builds: the real gate
(whose review counters an alert reads too), /metrics opened with `--authorization-always-allow-paths` so that
reading it counts nothing."""

from __future__ import annotations

import re
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from autoscaler.settings import ServeSettings
from tests.api.builders import Pki
from tests.api.conftest import secured_api
from tests.fakes.kube import FakeKubeApi
from tests.manifests.support import PROMETHEUS, label_matchers, load_yaml, not_at_zero

TARGET_LABELS = frozenset({"job", "namespace", "pod"})
"""Prometheus's own labels of the scrape, not the adapter's."""

UNKNOWN_IN_ADVANCE = {
    "modelmesh_autoscaler_api_requests_total":
        "a route and a status code per series, made at the first answer; the alert is a share of the HPAs' steady "
        "requests (4 a minute each) over 15 minutes, so the first 503 missed moves it by one scrape",
    "modelmesh_autoscaler_source_errors_total":
        "one reason a series, among some twenty the sources name where they fail; the alert is a share over 15 "
        "minutes above 0.05, which no first failure alone reaches",
    "modelmesh_autoscaler_source_reads_total":
        "only the scrape source counts reads: a series at 0 for the Prometheus source would make the alert divide "
        "its errors by a rate of 0",
}
"""Counters whose series the alerts need cannot all exist before they are counted, and why that is harmless."""

_RATED = re.compile(r"\b(?:rate|increase|changes|resets)\(\s*(modelmesh_autoscaler_\w+)\{([^}]*)\}\[")


def rated_selectors() -> list[tuple[str, str, dict[str, str]]]:
    """(alert, sample name, the labels it selects by exact value) of every counter the alerts rate."""
    found = []
    for group in load_yaml(PROMETHEUS / "rules.yaml")["groups"]:
        for rule in group["rules"]:
            for name, matchers in _RATED.findall(rule["expr"]):
                exact = {label: value for label, operator, value in label_matchers(matchers)
                         if operator == "=" and label not in TARGET_LABELS}
                found.append((rule.get("alert") or rule["record"], name, exact))
    return found


async def test_every_counter_an_alert_rates_is_published_at_0_from_the_start(
    pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]
) -> None:
    opened = settings_for(authorization_always_allow_paths=("/healthz", "/livez", "/readyz", "/metrics"))
    async with secured_api(pki, kube, opened) as api:
        status, page = await api.get("/metrics")
    assert status == 200, page
    samples = [sample for family in text_string_to_metric_families(page) for sample in family.samples]
    selectors = [selector for selector in rated_selectors() if selector[1] not in UNKNOWN_IN_ADVANCE]
    assert len(selectors) >= 8, selectors  # every rate the rules take, but those above
    missing = not_at_zero(selectors, samples)
    assert not missing, "\n".join(missing)
