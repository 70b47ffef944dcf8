"""A TokenReview the Kubernetes API does not answer keeps KEDA's poll waiting past KEDA's HTTP timeout (3 s by
default), so KEDA shows `context deadline exceeded`, not the adapter's 401 (tests/api/test_keda_review_timeout.py
runs it). The KEDA section and the README's troubleshooting table say so, with the settings that let KEDA wait
longer than the adapter's review (`reviews.DEFAULT_TIMEOUT_S`); and the KEDA section says that the adapter's review
caches are shorter than the shipped ScaledObject's `pollingInterval`, so a poll cannot ride on the last one's."""

from __future__ import annotations

import re
from pathlib import Path

from autoscaler.kube.reviews import DEFAULT_TIMEOUT_S
from autoscaler.settings import ServeSettings
from tests.manifests.support import KEDA_SCALED_OBJECT, load_yaml

REPO = Path(__file__).resolve().parent.parent
OPERATIONS = (REPO / "docs" / "operations.md").read_text()
README = (REPO / "README.md").read_text()
SYMPTOM = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"


def keda_section() -> str:
    section = OPERATIONS[OPERATIONS.index("### KEDA: what to set"):]
    return " ".join(section[:section.index("\n### ")].split())


def troubleshooting_row() -> str:
    rows = [line for line in README.splitlines() if line.startswith("|") and SYMPTOM in line]
    assert len(rows) == 1, f"README's troubleshooting table has {len(rows)} rows for KEDA's timeout"
    return rows[0]


def settings_outlast_the_review(text: str) -> None:
    trigger = re.findall(r'timeout: "(\d+)s"', text)
    operator = re.findall(r"KEDA_HTTP_DEFAULT_TIMEOUT=(\d+)", text)
    assert trigger and operator, "the trigger's `timeout` and keda-operator's KEDA_HTTP_DEFAULT_TIMEOUT, with values"
    assert min(float(t) for t in trigger) > DEFAULT_TIMEOUT_S
    assert min(float(ms) / 1000 for ms in operator) > DEFAULT_TIMEOUT_S


def test_the_keda_section_names_the_timeout_and_what_lets_keda_see_the_401() -> None:
    section = keda_section()
    assert SYMPTOM in section
    settings_outlast_the_review(section)


def test_the_troubleshooting_table_names_it_too() -> None:
    settings_outlast_the_review(troubleshooting_row())


def test_the_keda_section_says_a_poll_outlives_the_review_caches() -> None:
    polling = load_yaml(KEDA_SCALED_OBJECT)["spec"]["pollingInterval"]
    defaults = ServeSettings()
    ttl = max(defaults.token_cache_ttl_s, defaults.authorized_cache_ttl_s)
    assert ttl < polling  # else there is nothing to say
    section = keda_section()
    assert f"pollingInterval: {polling}" in section
    for flag in ("--authentication-token-webhook-cache-ttl", "--authorization-webhook-cache-authorized-ttl"):
        assert f"`{flag}`" in section
    assert f"{ttl:g} s" in section
