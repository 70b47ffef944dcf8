"""The shipped alerts through an adapter upgrade from release c32c335 and a rollback to it: nothing fires.

Release c32c335's adapter has no `modelmesh_autoscaler_discovery_healthy` (tests/upgrade/c32c335-manifests.yaml
lists the alerts it shipped, ModelMeshAutoscalerDiscoveryFailing not among them): while old replicas run, under
today's rules, that alert reads no series and must not fire, nor may any other alert whose series only today's
adapter writes. Today's replica writes it 0 at its first scrape (before its first list), then 1.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.manifests.support import alert_names, promtool_test_rules
from tests.manifests.test_monitoring_lifecycle import MINUTES, NS, adapter, during, exporter

RELEASE = Path(__file__).parent.parent / "upgrade" / "c32c335-manifests.yaml"


def discovery(pod: str, start: int, end: int) -> dict[str, str]:
    """Today's replica `pod`: its one served namespace's discovery, 0 until its first list, then current."""
    labels = f'job="modelmesh-autoscaler", namespace="{NS}", pod="{pod}"'
    return {"series": f"modelmesh_autoscaler_discovery_healthy{{{labels}}}",
            "values": during(start, end, f"0 1x{end - start - 1}")}


def test_the_discovery_alert_is_new_since_the_old_release() -> None:
    """What makes the rollout below a test of an upgrade: the old release had no such alert, nor series."""
    old_alerts = yaml.safe_load(RELEASE.read_text())["alerts"]
    assert "ModelMeshAutoscalerDiscoveryFailing" in alert_names()
    assert "ModelMeshAutoscalerDiscoveryFailing" not in old_alerts


def test_an_upgrade_from_the_old_release_and_a_rollback_fire_no_alert(tmp_path: Path) -> None:
    """The old adapter until minute 20, today's until 40, the old one again (a rollback) until the hour's end."""
    runtimes = {"busy": (2, MINUTES), "solo": (1, MINUTES)}
    series = [
        *exporter("busy", "busy-0", 0, MINUTES),
        *exporter("busy", "busy-1", 0, MINUTES),
        *exporter("solo", "solo-0", 0, MINUTES),
        *adapter("adapter-old", 0, 20, runtimes),
        *adapter("adapter-new", 20, 40, runtimes),
        discovery("adapter-new", 20, 40),
        *adapter("adapter-back", 40, MINUTES, runtimes),
    ]
    quiet = [{"eval_time": f"{minute}m", "alertname": name, "exp_alerts": []}
             for minute in (12, 19, 21, 25, 34, 39, 41, 45, 52, 59) for name in alert_names()]
    done = promtool_test_rules(tmp_path, [{"interval": "1m", "input_series": series, "alert_rule_test": quiet}],
                               "upgrade_test.yaml")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
