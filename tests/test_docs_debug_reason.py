"""docs/operations.md says what /debug/runtimes' `reason` is, and a healthy CPU-only runtime's agrees with it.

A runtime whose exporters run with `--no-gpu` serves every value but `modelmesh_gpu_busy` (503: no pod has the
signal), and its `reason` says why: `no ready pod has a GPU collector (...)`. The /debug section described
`reason` as why values are held or unknown, and a user reading a healthy demo's /debug took the non-empty reason
for a problem. The field is right (one value is unknown, and the reason tells "collector off" from "collector
failing", which want different fixes); the section now says it covers one value too, and quotes this one."""

from __future__ import annotations

from autoscaler.names import ServedMetric
from autoscaler.policies.gpu_forgetting import NO_GPU_COLLECTOR
from tests.policies.test_gpu_forgetting import NO_GPU, POLICY, START, refresh
from tests.test_docs_repo_paths import REPO

SECTION = "### /debug/runtimes: why the adapter decided what it did"


def debug_section_first_paragraph() -> str:
    text = (REPO / "docs" / "operations.md").read_text()
    start = text.index(SECTION) + len(SECTION)
    return " ".join(text[start:text.index("\n\n", start + 2)].split())


def test_a_cpu_only_runtime_serving_all_but_gpu_busy_has_the_reason_the_docs_quote() -> None:
    view, _ = refresh([NO_GPU] * 4, START, None, POLICY)
    assert view.known and view.values[ServedMetric.DESIRED_REPLICAS].value is not None
    assert view.values[ServedMetric.GPU_BUSY].value is None
    assert view.reason == NO_GPU_COLLECTOR
    paragraph = debug_section_first_paragraph()
    assert f"`{NO_GPU_COLLECTOR}`" in paragraph, paragraph
    assert "empty where every value is served" in paragraph, paragraph
