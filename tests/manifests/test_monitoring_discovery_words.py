"""ModelMeshAutoscalerDiscoveryFailing quotes the 503 that the HPAs of the namespace it names really get.

Its description said they get 503 "metric source down": the words of a Prometheus (or exporter) outage, which
docs/operations.md's list of 503s sends to the metric source. The adapter answers a runtime whose namespace's pod
watch or Deployment read fails with `DISCOVERY_DOWN` ("pod discovery out of date ..."), which the same list sends
to RBAC. An on-call who matched the HPA's event against the alert went to Prometheus. So did the namespaced
install's kustomization, which says what a namespace left without its RoleBinding answers.
"""

from __future__ import annotations

import re
from pathlib import Path

from autoscaler.policies.decision import DISCOVERY_DOWN
from tests.manifests.support import EXAMPLES, alerts_sent

QUOTED_503 = re.compile(r'503 "([^"]+)"')
"""A 503's words as a text quotes them; a quote may stop short with "...". """
REFUSED = "team-b"


def quoted_503s(text: str) -> list[str]:
    """The 503 messages `text` quotes, without a closing "..." where it stops short."""
    return [" ".join(words.removesuffix("...").split()) for words in QUOTED_503.findall(text)]


def test_the_discovery_alert_quotes_the_503_the_adapter_answers(tmp_path: Path) -> None:
    adapter = 'job="modelmesh-autoscaler", instance="10.0.0.9:6443", pod="modelmesh-autoscaler-0"'
    series = [{"series": f"up{{{adapter}}}", "values": "1x20"},
              {"series": f'modelmesh_autoscaler_discovery_healthy{{{adapter}, namespace="{REFUSED}"}}',
               "values": "0x20"}]
    [alert] = [alert for alert in alerts_sent(tmp_path, series, 15)
               if alert.labels["alertname"] == "ModelMeshAutoscalerDiscoveryFailing"]
    description = alert.annotations["description"]
    quoted = quoted_503s(description)
    assert quoted, f"the alert no longer quotes the HPAs' 503: update this test: {description}"
    assert all(DISCOVERY_DOWN.startswith(words) for words in quoted), (quoted, DISCOVERY_DOWN)


def test_the_namespaced_install_quotes_the_503_of_a_namespace_without_its_role_binding() -> None:
    text = (EXAMPLES / "namespaced" / "kustomization.yaml").read_text()
    comment = " ".join(line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#"))
    quoted = quoted_503s(comment)
    assert quoted, "the namespaced kustomization no longer says what an unbound namespace answers: update this test"
    assert all(DISCOVERY_DOWN.startswith(words) for words in quoted), (quoted, DISCOVERY_DOWN)
