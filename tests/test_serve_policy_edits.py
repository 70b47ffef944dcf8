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


NEAR_MISSES = {  # runtime: a min-replicas annotation as people mistype it
    "rt-case": f"{PREFIX}Min-Replicas",
    "rt-camel": f"{PREFIX}minReplicas",
    "rt-prefix": "autoscaling.modelmesh.io/min-replicas",
}


FILE_SPELLING = {  # runtime: its min-replicas annotations in the policy file's spelling, alone or beside the documented
    "rt-underscores": {f"{PREFIX}min_replicas": "6"},
    "rt-both": {f"{PREFIX}min-replicas": "7", f"{PREFIX}min_replicas": "6"},
}


def test_a_near_miss_annotation_spelling_is_ignored_and_said_once(tmp_path: Path) -> None:
    """`autoscaler.modelmesh.io/min_replicas=6` (the file's key) was applied without a word, while `Min-Replicas`
    or another prefix was ignored, said in a warning that did not say what applied, and shown nowhere in /debug.
    The file's spelling was read before, so an upgrade must keep applying it: it applies, said once."""
    targets, config, log = tmp_path / "targets.yaml", tmp_path / "policy.yaml", tmp_path / "adapter.log"
    config.write_text("defaults: {min_replicas: 2}\n")
    written = {runtime: {annotation: "6"} for runtime, annotation in NEAR_MISSES.items()} | FILE_SPELLING
    targets.write_text("runtimes:\n" + "".join(
        f"  - {{namespace: default, deployment: {runtime}, annotations: {json.dumps(annotations)},\n"
        f"     pods: [{{name: {runtime}-0, url: 'http://127.0.0.1:9/metrics'}}]}}\n"
        for runtime, annotations in written.items()))
    listen = free_port()
    url = f"https://127.0.0.1:{listen}/debug/runtimes/default/"
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{listen}",
            "--targets", str(targets), "--config", str(config), "--refresh-interval", "1"]
    with running(args, url + "rt-case", log):
        next_refresh(url + "rt-case")
        shown = {runtime: next_refresh(url + runtime)["policy"]["min_replicas"] for runtime in written}
    for runtime, annotation in NEAR_MISSES.items():
        assert shown[runtime]["value"] == 2 and shown[runtime]["from"] == f"{config}: defaults", shown[runtime]
        assert f"{annotation}='6'" in shown[runtime]["ignored"], shown[runtime]
        assert f"write {PREFIX}min-replicas" in shown[runtime]["ignored"], shown[runtime]
        [warning] = [line for line in log.read_text().splitlines() if f"{annotation}='6'" in line]
        assert "WARNING" in warning and f"default/{runtime}" in warning, warning
        assert f"write {PREFIX}min-replicas" in warning, warning  # the one spelling read
        assert f"uses min_replicas 2 ({config}: defaults)" in warning, warning  # what applies instead
    assert shown["rt-underscores"] == {"value": 6, "from": f"annotation {PREFIX}min_replicas"}, shown
    [warning] = [line for line in log.read_text().splitlines() if f"{PREFIX}min_replicas='6'" in line
                 and "default/rt-underscores" in line]
    assert "WARNING" in warning and f"min_replicas='6' applies as {PREFIX}min-replicas" in warning, warning
    assert f"write {PREFIX}min-replicas=6" in warning, warning
    both = shown["rt-both"]
    assert both["value"] == 7 and both["from"] == f"annotation {PREFIX}min-replicas", both
    assert f"{PREFIX}min_replicas='6'" in both["ignored"], both
    [warning] = [line for line in log.read_text().splitlines()
                 if f"{PREFIX}min_replicas='6'" in line and "default/rt-both" in line]
    assert f"ignoring annotation {PREFIX}min_replicas='6'" in warning, warning
    assert f"uses min_replicas 7 from {PREFIX}min-replicas: remove {PREFIX}min_replicas" in warning, warning


def test_an_annotation_naming_no_policy_key_is_shown_in_debug_until_removed(tmp_path: Path) -> None:
    """`skew-ordr=3` (a typo in the key) was warned about in the log only: /debug, where a platform engineer looks
    to see why an annotation does not apply, showed no trace of it."""
    targets, config, log = tmp_path / "targets.yaml", tmp_path / "policy.yaml", tmp_path / "adapter.log"
    config.write_text(POLICY)
    write_targets(targets, {"skew-ordr": "3", "max-replica": "8", "min-replicas": "3"})
    listen = free_port()
    url = f"https://127.0.0.1:{listen}/debug/runtimes/default/rt-a"
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "1", "--listen", f"127.0.0.1:{listen}",
            "--targets", str(targets), "--config", str(config), "--refresh-interval", "1"]
    with running(args, url, log) as adapter:
        wait_until_logged(adapter, log, f"{PREFIX}max-replica='8'")
        document = next_refresh(url)
        write_targets(targets, {"min-replicas": "4"})  # the typos removed, and a value to see the edit read by
        fixed = poll(lambda: doc if (doc := debug_document(url))["bounds"][0] == 4 else None, timeout=30)
    shown = document["policy"]
    for key, entry in shown.items():  # a client walking the policy keys meets only `{value, from}` objects
        assert isinstance(entry, dict) and {"value", "from"} <= entry.keys(), (key, entry)
    assert document["unknown_annotations"] == [
        f"{PREFIX}max-replica='8': no such policy annotation (did you mean {PREFIX}max-replicas?)",
        f"{PREFIX}skew-ordr='3': no such policy annotation (did you mean {PREFIX}skew-order?)",
    ], shown
    assert shown["min_replicas"] == {"value": 3, "from": f"annotation {PREFIX}min-replicas"}, shown  # the good one
    warnings = [line for line in log.read_text().splitlines() if "no such policy annotation" in line]
    for entry in document["unknown_annotations"]:  # the log's words, as the log says them
        assert [line for line in warnings if f"ignoring annotation {entry}" in line], (entry, warnings)
    assert fixed["unknown_annotations"] == [], fixed
