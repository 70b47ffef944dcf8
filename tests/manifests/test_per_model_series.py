"""The per-model last-served series in the shipped monitoring: one series per (pod, model it served within
`--model-recency-horizon`), a million at 10,000 pods serving 100 models each (docs/design.md). An adapter
scraping the exporters (the default) reads it from them and Prometheus has no use for it, so the scrape config
and the PodMonitor show, commented, how to keep it out of Prometheus; these tests keep that alternative honest:
it parses, promtool takes it, and it drops that series and nothing the rules, the dashboard or the adapter's
`--source=prometheus` read besides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from exporter import names
from tests.manifests.series import relabel
from tests.manifests.support import (
    PROMETHEUS,
    PROMTOOL,
    commented_yaml,
    find,
    kustomize,
    load_yaml,
    metric_names,
    plain_exporter_endpoint,
    run,
    with_token_file,
)
from tests.manifests.test_monitoring import EXPORTER_JOB, KUBERNETES_SD_FIELDS, every_expression

MARKER = "To keep the per-model series out of Prometheus"


def exporter_sample_names() -> set[str]:
    """Every sample name the exporter can publish (its names module), the per-model series among them."""
    return {value for key, value in vars(names).items()
            if isinstance(value, str) and value.startswith("modelmesh_") and not key.startswith("MM_")}


def kept(rules: list[dict[str, Any]], name: str) -> bool:
    """Whether a scraped sample named `name` is stored after these metric relabel rules."""
    return relabel({"job_name": EXPORTER_JOB, "relabel_configs": rules},
                   {"__address__": "10.0.0.1:9187", "__name__": name}) is not None


def test_the_scrape_configs_drop_keeps_out_the_per_model_series_and_nothing_else() -> None:
    rules = commented_yaml(PROMETHEUS / "scrape-config.yaml", MARKER)["metric_relabel_configs"]
    published = exporter_sample_names()
    assert names.MODEL_LAST_SERVED_TIMESTAMP in published
    assert not kept(rules, names.MODEL_LAST_SERVED_TIMESTAMP)
    used = set().union(*(metric_names(expr) for _, expr in every_expression()))
    assert names.MODEL_LAST_SERVED_TIMESTAMP not in used, "a rule or panel reads the series the example drops"
    dropped = {name for name in published if not kept(rules, name)}
    assert dropped == {names.MODEL_LAST_SERVED_TIMESTAMP}


def test_the_scrape_config_with_the_drop_passes_promtool(tmp_path: Path) -> None:
    config = load_yaml(PROMETHEUS / "scrape-config.yaml")
    (job,) = [job for job in config["scrape_configs"] if job["job_name"] == EXPORTER_JOB]
    job.update(commented_yaml(PROMETHEUS / "scrape-config.yaml", MARKER))
    for each in config["scrape_configs"]:  # Debian's promtool has no Kubernetes discovery (test_monitoring)
        (discovery,) = each.pop("kubernetes_sd_configs")
        assert set(discovery) <= KUBERNETES_SD_FIELDS
        each["static_configs"] = [{"targets": ["127.0.0.1:9187"]}]
    wrapped = tmp_path / "prometheus.yml"
    wrapped.write_text(yaml.safe_dump(with_token_file(config, tmp_path / "token")))
    done = run([PROMTOOL, "check", "config", str(wrapped)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_pod_monitors_drop_is_the_scrape_configs() -> None:
    """The operator's metricRelabelings are the scrape config's metric_relabel_configs in camelCase."""
    source = PROMETHEUS / "pod-monitor-exporter.yaml"
    endpoint = plain_exporter_endpoint(find(kustomize(PROMETHEUS), "PodMonitor", EXPORTER_JOB))
    assert "metricRelabelings" not in endpoint  # commented: the series stays unless the user drops it
    monitor = commented_yaml(source, MARKER)["metricRelabelings"]
    scrape = commented_yaml(PROMETHEUS / "scrape-config.yaml", MARKER)["metric_relabel_configs"]
    camel = {"sourceLabels": "source_labels", "regex": "regex", "action": "action"}
    assert [{camel[key]: value for key, value in rule.items()} for rule in monitor] == scrape
