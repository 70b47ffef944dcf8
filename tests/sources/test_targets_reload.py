"""The targets file is read again when it changes, so pods can come and go without a restart (the demo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.sources.targets import StaticTargetsDiscovery, TargetsFileError, load_targets

KEY = RuntimeKey("default", "modelmesh-serving-demo")


def targets(*names: str) -> str:
    pods = "\n".join(f"      - {{name: {n}, url: 'http://127.0.0.1:1/metrics'}}" for n in names)
    return f"runtimes:\n  - namespace: default\n    deployment: modelmesh-serving-demo\n    pods:\n{pods}\n"


def touch_later(path: Path, text: str, step: int) -> None:
    path.write_text(text)
    stamp = path.stat().st_mtime_ns + step * 1_000_000_000  # a new mtime even on coarse file systems
    os.utime(path, ns=(stamp, stamp))


async def test_added_and_removed_pods_show_up_and_a_broken_edit_keeps_the_last_good(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text(targets("demo-0", "demo-1"))
    discovery = StaticTargetsDiscovery(path)
    await discovery.start()
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0", "demo-1"]
    touch_later(path, targets("demo-0", "demo-1", "demo-2"), 1)
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0", "demo-1", "demo-2"]
    assert discovery.inventory()[KEY].replicas == 3
    touch_later(path, targets("demo-0", "demo-2"), 2)
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0", "demo-2"]
    touch_later(path, "runtimes: [oops", 3)
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0", "demo-2"]
    assert "keeping the last good one" in caplog.text


def test_a_runtime_key_given_twice_in_the_targets_file_is_named(tmp_path: Path) -> None:
    """Two `pods:` under one runtime (a paste): PyYAML kept the second list, and the first list's pods were never
    scraped, without a word."""
    path = tmp_path / "targets.yaml"
    path.write_text("runtimes:\n- namespace: default\n  deployment: d\n  pods: [{name: a, url: 'http://a/metrics'}]\n"
                    "  pods: [{name: b, url: 'http://b/metrics'}]\n")
    with pytest.raises(TargetsFileError, match="found duplicate key 'pods' \\(first at line 4\\)"):
        load_targets(path)
