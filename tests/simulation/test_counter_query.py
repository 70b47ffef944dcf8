"""The query the counter warning gives, run on ModelMesh's own counter: a user pastes it into the guide's export.

ModelMesh labels its requests `modelId`; the warning said `sum by (model) (increase(COUNTER[60s]))`, which on that
counter sums every model into one series without a `model` label: pasted into docs/simulation.md's export it
failed with KeyError: 'model' and wrote a trace of its header alone. Here promtool evaluates the query the
warning prints on a ModelMesh-like counter of two pods, as Prometheus would answer the export."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from tests.simulation.runs import simulate, write_trace
from tests.simulation.test_user_inputs import counter_rows

PROMTOOL = "/usr/bin/promtool"
COUNTER = "modelmesh_invoke_model_milliseconds_count"


def test_the_counter_warnings_query_gives_each_modelmesh_model_its_row(tmp_path: Path) -> None:
    result = simulate(tmp_path, write_trace(tmp_path, counter_rows()), "--max-replicas", "20", "--policies", "mean-hpa")
    [warning] = [line for line in result.stderr.splitlines() if "running total" in line]
    said = re.search(r"PromQL: (.+?) at a query_range step of 60s", warning)
    assert said is not None, warning
    query = said.group(1).replace("COUNTER", COUNTER)
    (tmp_path / "none.yaml").write_text("groups: []\n")
    test = {"rule_files": ["none.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "15s",
        "input_series": [  # bert on two pods (2 and 1 req/s), gpt2 on one (0.5 req/s), and a request without an id
            {"series": f'{COUNTER}{{modelId="bert",pod="p1",namespace="modelmesh-serving"}}', "values": "0+30x40"},
            {"series": f'{COUNTER}{{modelId="bert",pod="p2",namespace="modelmesh-serving"}}', "values": "0+15x40"},
            {"series": f'{COUNTER}{{modelId="gpt2",pod="p2",namespace="modelmesh-serving"}}', "values": "0+7.5x40"},
            {"series": f'{COUNTER}{{modelId="",pod="p2",namespace="modelmesh-serving"}}', "values": "0+1x40"},
        ],
        "promql_expr_test": [{"expr": query, "eval_time": "5m", "exp_samples": [
            {"labels": '{model="bert"}', "value": 180},
            {"labels": '{model="gpt2"}', "value": 30},
        ]}],
    }]}
    (tmp_path / "query_test.yaml").write_text(yaml.safe_dump(test))
    ran = subprocess.run([PROMTOOL, "test", "rules", "query_test.yaml"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, f"{query}\n{ran.stdout}{ran.stderr}"
