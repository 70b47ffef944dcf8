"""How soon a Deployment annotation applies, as docs/configuration.md says it: annotations are read from the
Deployments, which discovery re-reads on a timer (they are not watched; pods do not carry them), so a
"next refresh" promise had edits show up 26-30 s later with a 2 s refresh interval."""

from __future__ import annotations

import inspect
from pathlib import Path

from autoscaler.sources.kube_pods import KubePodDiscovery

CONFIGURATION = Path(__file__).parent.parent / "docs" / "configuration.md"


def test_the_docs_give_the_deployment_reread_as_the_annotations_delay() -> None:
    resync = inspect.signature(KubePodDiscovery).parameters["resync_interval_s"].default
    text = CONFIGURATION.read_text()
    section = text[text.index("## Per-runtime annotations"):text.index("## Targets file")]
    assert f"every {resync:g} s" in section, "the annotations section must give the Deployments' re-read interval"
    assert "take effect at the next refresh" not in section
    [row] = [line for line in text.splitlines() if line.startswith("| [annotations]")]
    assert f"{resync:g} s" in row, row
