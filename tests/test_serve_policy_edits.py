"""A running adapter whose runtime annotations are edited with a slip, as a platform engineer tuning a runtime
does: what it serves, what /debug shows and what the log says (docs/configuration.md, Per-runtime annotations)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.support.ports import free_port
from tests.support.processes import http_get, poll, running, wait_until_logged

PREFIX = "autoscaler.modelmesh.io/"
POLICY = "runtimes: [{namespace: default, deployment: rt-a, min_replicas: 2}]\n"


def write_targets(path: Path, annotations: dict[str, str]) -> None:
    """The targets file with `annotations` on runtime default/rt-a, replaced by a rename as a ConfigMap is."""
    written = ", ".join(f"{PREFIX}{k}: '{v}'" for k, v in annotations.items())
    draft = path.with_suffix(".draft")
    draft.write_text("runtimes:\n  - namespace: default\n    deployment: rt-a\n"
                     f"    annotations: {{{written}}}\n    pods: [{{name: a-0, url: 'http://127.0.0.1:9/metrics'}}]\n")
    os.replace(draft, path)


def debug_document(url: str) -> dict[str, Any]:
    status, body = poll(lambda: answer if (answer := http_get(url))[0] != 503 else None, timeout=30)
    assert status == 200, body
    document: dict[str, Any] = json.loads(body)
    return document


def next_refresh(url: str) -> dict[str, Any]:
    """The /debug document of a refresh after the one shown now."""
    seen = debug_document(url)["refreshed"]
    return poll(lambda: doc if (doc := debug_document(url))["refreshed"] != seen else None, timeout=30)


def test_a_typo_in_an_annotation_keeps_its_last_good_value(tmp_path: Path) -> None:
    """min-replicas=6 edited to 6x: the runtime fell back to the file's min_replicas 2 and started scaling
    down, with a warning that did not say so and nothing in /debug."""
    targets, config, log = tmp_path / "targets.yaml", tmp_path / "policy.yaml", tmp_path / "adapter.log"
    config.write_text(POLICY)
    write_targets(targets, {"min-replicas": "6", "max-replicas": "8"})
    listen = free_port()
    url = f"https://127.0.0.1:{listen}/debug/runtimes/default/rt-a"
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{listen}",
            "--targets", str(targets), "--config", str(config), "--refresh-interval", "1"]
    with running(args, url, log) as adapter:
        assert debug_document(url)["bounds"] == [6, 8]
        write_targets(targets, {"min-replicas": "6x", "max-replicas": "8"})
        wait_until_logged(adapter, log, f"{PREFIX}min-replicas='6x'")
        document = next_refresh(url)
    assert document["bounds"] == [6, 8]
    shown = document["policy"]["min_replicas"]
    assert shown["value"] == 6 and f"annotation {PREFIX}min-replicas" in shown["from"], shown
    assert "'6x'" in shown["ignored"] and "whole number" in shown["ignored"], shown
    [warning] = [line for line in log.read_text().splitlines() if "'6x'" in line]
    assert "WARNING" in warning and "whole number" in warning
    assert "keeps min_replicas 6" in warning, warning  # what still applies
    assert f"{PREFIX}min-replicas=6 " in warning, warning  # what to write
    assert "policy annotations changed" not in log.read_text()
