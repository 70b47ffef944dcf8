"""What the docs tell a user about checking the Prometheus examples themselves, and about what the alerts need,
held to what promtool and the rules really do.

A new user ran `promtool check config manifests/examples/prometheus/scrape-config.yaml`, as manifests/README.md's
"Tests" seemed to promise, and it failed: Debian's promtool has no Kubernetes discovery, and any promtool refuses
the ServiceAccount token file that exists only in a pod; the suite passed only because it stands both in first.
And ModelMeshRuntimeAtMaxReplicas reads kube-state-metrics, which only a comment in rules.yaml said: without it
the alert never fires, and nothing says so.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from tests.manifests.support import (
    MANIFESTS,
    PROMETHEUS,
    PROMTOOL,
    REPO,
    load_yaml,
    run,
    with_token_file,
)

README = MANIFESTS / "README.md"
OPERATIONS = REPO / "docs" / "operations.md"

ANY_PROMTOOL = "# any promtool"
"""How manifests/README.md marks a command every promtool runs on the shipped files as they are."""

KUBE_STATE_METRIC = re.compile(r"\bkube_[a-z_]+")
"""A kube-state-metrics series name (`kube_horizontalpodautoscaler_spec_max_replicas`)."""

REFUSALS = ("field kubernetes_sd_configs not found in type config.ScrapeConfig",
            "error checking authorization credentials or bearer token file")
"""What promtool answers `check config scrape-config.yaml` with: a build without Kubernetes discovery (Debian's,
Ubuntu's) the first, any other the second (the token file is a pod's)."""


def readme_promtool_commands() -> list[tuple[str, str]]:
    """(command, its comment) of each `promtool ...` line in manifests/README.md's shell blocks."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.DOTALL):
        for line in block.splitlines():
            command, _, comment = line.partition("#")
            if command.strip().startswith("promtool "):
                found.append((command.strip(), f"#{comment}".strip()))
    return found


def test_the_commands_the_readme_says_any_promtool_runs_pass_here() -> None:
    commands = [command for command, comment in readme_promtool_commands() if comment.startswith(ANY_PROMTOOL)]
    assert {shlex.split(command)[1] for command in commands} >= {"check", "test"}, commands
    for command in commands:
        done = run([PROMTOOL, *shlex.split(command)[1:]], cwd=PROMETHEUS)
        assert done.returncode == 0, (command, done.stdout + done.stderr)


def test_the_readme_says_what_promtool_answers_for_the_scrape_config_as_shipped() -> None:
    done = run([PROMTOOL, "check", "config", "scrape-config.yaml"], cwd=PROMETHEUS)
    assert done.returncode != 0, "checked as shipped, the scrape config passed: the README says it cannot"
    [refusal] = [refusal for refusal in REFUSALS if refusal in done.stdout + done.stderr]
    text = " ".join(README.read_text().split())
    assert refusal in text, f"manifests/README.md does not tell the user promtool's {refusal!r}"
    assert "--syntax-only scrape-config.yaml" in text


def test_syntax_only_leaves_the_token_file_out_and_nothing_else(tmp_path: Path) -> None:
    """What the README tells a user with a promtool that has Kubernetes discovery: `--syntax-only` checks the file
    without the pod's token file. Checked here on all but the discovery blocks, which this promtool cannot read."""
    config = load_yaml(PROMETHEUS / "scrape-config.yaml")
    for job in config["scrape_configs"]:
        job.pop("kubernetes_sd_configs")
        job["static_configs"] = [{"targets": ["127.0.0.1:9187"]}]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    full = run([PROMTOOL, "check", "config", str(path)])
    assert full.returncode != 0 and REFUSALS[1] in full.stdout + full.stderr, full.stdout + full.stderr
    syntax = run([PROMTOOL, "check", "config", "--syntax-only", str(path)])
    assert syntax.returncode == 0, syntax.stdout + syntax.stderr
    path.write_text(yaml.safe_dump(with_token_file(config, tmp_path / "token")))
    assert run([PROMTOOL, "check", "config", str(path)]).returncode == 0, "only the token file was missing"


def alerts_reading_kube_state_metrics() -> set[str]:
    groups = load_yaml(PROMETHEUS / "rules.yaml")["groups"]
    return {rule["alert"] for group in groups for rule in group["rules"]
            if "alert" in rule and KUBE_STATE_METRIC.search(rule["expr"])}


def paragraphs(heading: str, end: str) -> list[str]:
    """The paragraphs of docs/operations.md from the one holding `heading` to the one holding `end`, each on one
    line."""
    found = [" ".join(paragraph.split()) for paragraph in OPERATIONS.read_text().split("\n\n")]
    first = next(at for at, paragraph in enumerate(found) if heading in paragraph)
    last = next(at for at, paragraph in enumerate(found) if at >= first and end in paragraph)
    return found[first:last + 1]


def test_the_operations_guide_names_the_alerts_that_need_kube_state_metrics() -> None:
    needing = alerts_reading_kube_state_metrics()
    assert needing, "no alert reads kube-state-metrics: drop this test and the docs' words"
    for where, heading, end in (
            ("§4", "### 4. Optional: Prometheus and dashboards", "### Securing what Prometheus holds"),
            ("the alert list", "`manifests/examples/prometheus/rules.yaml` ships alerts on these",
             "Each alert's description says")):
        for alert in needing:
            told = [paragraph for paragraph in paragraphs(heading, end)
                    if f"`{alert}`" in paragraph and "kube-state-metrics" in paragraph and "never fires" in paragraph]
            assert told, f"docs/operations.md {where}: {alert} needs kube-state-metrics and is silent without it"
