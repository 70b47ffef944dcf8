"""What the manifest tests share: where things are, building kustomizations, and reading PromQL.

Everything here runs offline: `kubectl kustomize` needs no cluster, and PromQL is read with a small lexer
that is enough to pull metric names out of the expressions this project ships (string literals, label
matchers, grouping clauses and ranges removed; what is left and not called like a function is a name).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.samples import Sample

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
BASE = MANIFESTS / "base"
EXAMPLES = MANIFESTS / "examples"
PROMETHEUS = EXAMPLES / "prometheus"
GRAFANA = EXAMPLES / "grafana"
CERT_MANAGER = EXAMPLES / "cert-manager"
EXPORTER_TLS = EXAMPLES / "exporter-tls"
KEDA = EXAMPLES / "keda"
KEDA_SCALED_OBJECT = KEDA / "scaled-object-triton.yaml"
"""Applied on its own once the RuntimeScale has its replicas: not part of the overlay (docs/operations.md, KEDA)."""
KUSTOMIZATIONS = (BASE, EXAMPLES, CERT_MANAGER, PROMETHEUS, KEDA, EXPORTER_TLS)

SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
"""Where a pod (Prometheus's) finds its ServiceAccount token: the shipped adapter job sends it."""

KUBECTL = "/usr/bin/kubectl"
PROMTOOL = "/usr/bin/promtool"

Object = dict[str, Any]


@functools.cache
def _build(directory: Path) -> str:
    done = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory.relative_to(REPO)} failed:\n{done.stderr}")
    return done.stdout


def kustomize(directory: Path) -> list[Object]:
    """The objects `kubectl kustomize DIR` renders (a fresh copy each call: tests may change them)."""
    return [doc for doc in yaml.safe_load_all(_build(directory)) if doc is not None]


def installed(directory: Path) -> list[Object]:
    """What the install guides apply from `directory`: its kustomization, and for the KEDA overlay also the
    ScaledObject applied after it."""
    extra = [load_yaml(KEDA_SCALED_OBJECT)] if directory == KEDA else []
    return kustomize(directory) + extra


def find(objects: list[Object], kind: str, name: str | None = None) -> Object:
    """The one object of this kind (and name); fails the test when there is not exactly one."""
    matches = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


def plain_exporter_endpoint(monitor: Object) -> Object:
    """The PodMonitor endpoint that scrapes the plain sidecar's port, `exporter`; the one for its TLS twin is the
    same but for port and scheme (tests/manifests/test_exporter_scheme_by_port_name.py)."""
    matches: list[Object] = [e for e in monitor["spec"]["podMetricsEndpoints"] if e["port"] == "exporter"]
    assert len(matches) == 1, f"expected one endpoint of port exporter, found {len(matches)}"
    return matches[0]


def container(pod_spec: Object, name: str) -> Object:
    matches: list[Object] = [c for c in pod_spec["containers"] if c["name"] == name]
    assert len(matches) == 1, f"expected one container {name!r}, found {[c['name'] for c in pod_spec['containers']]}"
    return matches[0]


def with_token_file(config: dict[str, Any], token_file: Path, token: str = "a-token") -> dict[str, Any]:
    """`config` (a Prometheus configuration) with every job that sends the pod's ServiceAccount token reading
    `token_file` instead, written with `token`: outside a pod there is no file at that path, and promtool and
    Prometheus both refuse a credentials file they cannot read."""
    token_file.write_text(token)
    for job in config["scrape_configs"]:
        authorization = job.get("authorization", {})
        if authorization.get("credentials_file") == SERVICE_ACCOUNT_TOKEN:
            authorization["credentials_file"] = str(token_file)
    return config


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def commented_yaml(path: Path, marker: str) -> Any:
    """The YAML written as a comment block in `path`: the `#` lines after the line containing `marker`, with
    their `#` in the same column, uncommented (keeps commented alternatives honest)."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line)
    column = lines[start].index("#")
    block: list[str] = []
    for line in lines[start + 1:]:
        if len(line) <= column or line[column] != "#" or line[:column].strip():
            break
        text = line[column + 1:]
        block.append(text[1:] if text.startswith(" ") else text)
    # Only the lines from the first YAML line on: prose lines before it end with a full stop or colon.
    first = next(i for i, line in enumerate(block) if line.lstrip().startswith("- ") or re.match(r"^\w+:", line))
    return yaml.safe_load("\n".join(block[first:]))


# ---- PromQL ----

# Words of PromQL that are not metric names when they are not followed by "(".
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
                       "group_left", "group_right", "inf", "nan", "atan2"})
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(\s*\()?")
_LABEL_VALUE = re.compile(r'\b(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (`foo`, `foo{...}`, `foo[5m]`), not functions, labels or numbers."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub("", text)
    found: set[str] = set()
    for match in _IDENTIFIER.finditer(text):
        word, call = match.group(1), match.group(2)
        if call or word.lower() in _KEYWORDS or re.fullmatch(r"\d.*", word):
            continue
        found.add(word)
    for label, operator, value in label_matchers(expr):  # `{__name__=~"a|b"}`: a selector of several names
        if label == "__name__" and operator in ("=", "=~") and _NAME_ALTERNATIVES.fullmatch(value):
            found.update(value.split("|"))
    return found


_NAME_ALTERNATIVES = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?:\|[a-zA-Z_:][a-zA-Z0-9_:]*)*")


def label_matchers(expr: str) -> list[tuple[str, str, str]]:
    """(label, operator, value) of every label matcher in the expression."""
    return [(m.group(1), m.group(2), m.group(3)) for m in _LABEL_VALUE.finditer(expr)]


def not_at_zero(selectors: Iterable[tuple[str, str, dict[str, str]]], samples: Iterable[Sample]) -> list[str]:
    """Each selector (where it is, the sample name, the labels it selects by exact value) that finds no sample, or one
    above 0, among a fresh process's `samples`, said: a series a rate or increase is taken of that first appears at
    its first count has no rate in Prometheus (the first failure unseen)."""
    samples = list(samples)
    missing = []
    for where, name, labels in selectors:
        values = [sample.value for sample in samples
                  if sample.name == name and labels.items() <= sample.labels.items()]
        if not values or any(values):
            missing.append(f"{where}: {name}{labels} is {values or 'absent'}")
    return missing


def run(command: list[str], cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


# ---- the shipped rules under promtool ----


def alert_names() -> list[str]:
    """The name of every alert the shipped rules.yaml defines."""
    return [rule["alert"] for group in load_yaml(PROMETHEUS / "rules.yaml")["groups"] for rule in group["rules"]
            if "alert" in rule]


def promtool_test_rules(tmp_path: Path, tests: list[dict[str, Any]], name: str = "rules_test.yaml",
                        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` on a unit-test file written to `tmp_path / name`: `tests` (each with its own
    `interval`, `input_series` and checks) over the shipped rules.yaml, evaluated every minute."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"rule_files": [str(PROMETHEUS / "rules.yaml")], "evaluation_interval": "1m",
                                    "tests": tests}))
    return run([PROMTOOL, "test", "rules", str(path)], timeout=timeout)


@dataclass(frozen=True)
class SentAlert:
    """An alert as Alertmanager receives it: its labels and its annotations, templates rendered."""

    labels: dict[str, str]
    annotations: dict[str, str]


_PROMTOOL_GOT = re.compile(r"Labels:\{(.*)\}\s*\n\s*Annotations:\{(.*)\}")
_QUOTED_PAIR = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _pairs(text: str) -> dict[str, str]:
    """Go's `k="v", ...` (each value as strconv.Quote writes it: JSON's escapes for what these rules hold)."""
    return {key: json.loads(f'"{value}"') for key, value in _QUOTED_PAIR.findall(text)}


def alerts_sent(tmp_path: Path, series: list[dict[str, str]], minute: int) -> list[SentAlert]:
    """Every alert of the shipped rules.yaml firing at `minute` over `series` (one sample a minute), with what its
    receiver reads. promtool has no way to print them but a failed expectation: each alert is expected silent,
    and what promtool says it got instead is the answer."""
    tests = [{"interval": "1m", "input_series": series,
              "alert_rule_test": [{"eval_time": f"{minute}m", "alertname": name, "exp_alerts": []}
                                  for name in alert_names()]}]
    done = promtool_test_rules(tmp_path, tests, "alerts_sent_test.yaml")
    said = done.stdout + done.stderr
    sent = [SentAlert(_pairs(labels), _pairs(annotations)) for labels, annotations in _PROMTOOL_GOT.findall(said)]
    if done.returncode != 0 and not sent:
        raise AssertionError(f"promtool failed without an alert: {said[-3000:]}")
    return sent
