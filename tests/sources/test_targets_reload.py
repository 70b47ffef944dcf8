"""The targets file is read again when it changes, so pods can come and go without a restart (the demo)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.sources.targets import StaticTargetsDiscovery, TargetsFileError, load_targets

KEY = RuntimeKey("default", "modelmesh-serving-demo")


def targets(*names: str) -> str:
    pods = "\n".join(f"      - {{name: {n}, url: 'http://127.0.0.1:1/metrics'}}" for n in names)
    return f"runtimes:\n  - namespace: default\n    deployment: modelmesh-serving-demo\n    pods:\n{pods}\n"


async def started(tmp_path: Path, text: str) -> tuple[Path, StaticTargetsDiscovery]:
    """A targets file of `text` and the discovery started on it."""
    path = tmp_path / "targets.yaml"
    path.write_text(text)
    discovery = StaticTargetsDiscovery(path)
    await discovery.start()
    return path, discovery


def touch_later(path: Path, text: str, step: int) -> None:
    """Replace the file by a rename, as a ConfigMap's symlink swap or an atomic writer does: used at once."""
    staged = path.with_suffix(".staged")
    staged.write_text(text)
    stamp = path.stat().st_mtime_ns + step * 1_000_000_000  # a new mtime even on coarse file systems
    os.utime(staged, ns=(stamp, stamp))
    os.replace(staged, path)


async def test_added_and_removed_pods_show_up_and_a_broken_edit_keeps_the_last_good(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path, discovery = await started(tmp_path, targets("demo-0", "demo-1"))
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0", "demo-1"]
    touch_later(path, targets("demo-0", "demo-1", "demo-2"), 1)
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0", "demo-1", "demo-2"]
    assert discovery.inventory()[KEY].replicas == 3
    touch_later(path, targets("demo-0", "demo-2"), 2)
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0", "demo-2"]
    touch_later(path, "runtimes: [oops", 3)
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0", "demo-2"]
    assert "keeping the last good one" in caplog.text


@pytest.mark.parametrize(("namespace", "deployment", "named"), [
    ("Default_NS", "modelmesh-serving-demo", "namespace 'Default_NS' cannot exist"),
    ("default", "modelmesh_serving_demo", "deployment 'modelmesh_serving_demo' cannot exist"),
])
def test_a_runtime_no_hpa_can_ask_for_is_refused(tmp_path: Path, namespace: str, deployment: str,
                                                 named: str) -> None:
    """A namespace or Deployment name Kubernetes refuses: it was served, under a name no HPA's request can carry,
    while `--namespaces` refuses the same namespace at start."""
    path = tmp_path / "targets.yaml"
    path.write_text(f"runtimes:\n- namespace: {namespace}\n  deployment: {deployment}\n"
                    "  pods: [{name: a, url: 'http://a/metrics'}]\n")
    with pytest.raises(TargetsFileError, match=f"runtimes\\[0\\]: {named}"):
        load_targets(path)


def test_a_runtime_key_given_twice_in_the_targets_file_is_named(tmp_path: Path) -> None:
    """Two `pods:` under one runtime (a paste): PyYAML kept the second list, and the first list's pods were never
    scraped, without a word."""
    path = tmp_path / "targets.yaml"
    path.write_text("runtimes:\n- namespace: default\n  deployment: d\n  pods: [{name: a, url: 'http://a/metrics'}]\n"
                    "  pods: [{name: b, url: 'http://b/metrics'}]\n")
    with pytest.raises(TargetsFileError, match="found duplicate key 'pods' \\(first at line 4\\)"):
        load_targets(path)


async def test_an_edit_with_a_misspelt_key_is_refused_and_the_last_good_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`annotatons:` was dropped without a word: the runtime's policy annotations never applied."""
    path, discovery = await started(tmp_path, targets("demo-0"))
    touch_later(path, targets("demo-0", "demo-1").replace(
        "    pods:", "    annotatons: {autoscaler.modelmesh.io/max-replicas: '3'}\n    pods:"), 1)
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0"]
    assert (f"targets file changed but cannot be used; keeping the last good one: {path}: runtimes[0]: unknown key "
            "'annotatons' (did you mean 'annotations'?)") in caplog.text, caplog.text


async def test_an_edit_that_is_not_yaml_is_one_line_with_file_line_and_column(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """PyYAML's own message ran over seven lines of the log and named "<unicode string>", not the file."""
    path, discovery = await started(tmp_path, targets("demo-0"))
    touch_later(path, "runtimes: [ {namespace: default\n", 1)
    discovery.inventory()
    [warning] = [r.getMessage() for r in caplog.records if "keeping the last good one" in r.getMessage()]
    assert "\n" not in warning and "<unicode string>" not in warning, warning
    assert f"keeping the last good one: {path}:2:1: not valid YAML: " in warning, warning


@pytest.mark.parametrize(("text", "says"), [
    ("runtimes:\n- namespace: default\n  deployment: d\n  pods: []\n  annotatons: {}\n",
     "runtimes[0]: unknown key 'annotatons' (did you mean 'annotations'?)"),
    ("runtimes:\n- namespace: default\n  deployment: d\n  pods: [{name: p, url: 'http://a/metrics', ready: false}]\n",
     "runtimes[0].pods[0]: unknown key 'ready' (expected 'name', 'url'; every listed pod counts as Ready)"),
    ("runtimes:\n- namespace: default\n  deployment: d\n  pods: [{name: p, urll: 'http://a/metrics'}]\n",
     "runtimes[0].pods[0]: unknown key 'urll' (did you mean 'url'?)"),
    ("runtime:\n- namespace: default\n  deployment: d\n  pods: []\n",
     "unknown top-level key 'runtime' (did you mean 'runtimes'?)"),
], ids=["runtime-entry", "pod-entry-ready", "pod-entry-misspelt", "top-level"])
def test_an_unknown_key_is_named_with_the_file_the_entry_and_the_one_meant(
        tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text(text)
    with pytest.raises(TargetsFileError) as raised:
        load_targets(path)
    assert str(raised.value) == f"{path}: {says}"


def two_runtimes(*names: str) -> str:
    other = ("  - namespace: default\n    deployment: modelmesh-serving-other\n"
             "    pods: [{name: other-0, url: 'http://127.0.0.1:1/metrics'}]\n")
    return "runtimes:\n" + other + targets(*names).removeprefix("runtimes:\n")


def write_in_place(path: Path, text: str, step: int) -> None:
    """Truncate and write the same file (same inode), as `cat new > targets.yaml` or a slow writer does."""
    with path.open("r+") as file:
        file.truncate(0)
        file.write(text)
    stamp = path.stat().st_mtime_ns + step * 1_000_000_000
    os.utime(path, ns=(stamp, stamp))


async def test_a_file_caught_half_written_in_place_is_not_used(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A targets file rewritten in place was used as the reload found it: half-written (still valid YAML, the
    second runtime not there yet), the runtime dropped out for a refresh, its HPA got 404, and it came back with
    no memory. A file changed in place is used only once two checks in a row find it unchanged."""
    caplog.set_level(logging.INFO, "autoscaler.sources.targets")
    whole = two_runtimes("demo-0", "demo-1")
    path, discovery = await started(tmp_path, whole)
    write_in_place(path, whole[:whole.index("  - namespace: default\n    deployment: modelmesh-serving-demo")], 1)
    assert KEY in discovery.inventory()  # the refresh that catches it half-written keeps the runtime
    write_in_place(path, two_runtimes("demo-0", "demo-1", "demo-2"), 2)
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0", "demo-1"]  # just changed: not yet
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-0", "demo-1", "demo-2"]  # settled: used
    assert "added pods default/modelmesh-serving-demo/demo-2" in caplog.text, caplog.text
    assert "modelmesh-serving-other" not in caplog.text, caplog.text  # never said removed: it never was


async def test_a_reload_says_which_runtimes_and_pods_it_added_and_removed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "autoscaler.sources.targets")
    path, discovery = await started(tmp_path, two_runtimes("demo-0", "demo-1"))
    touch_later(path, targets("demo-1", "demo-2"), 1)
    assert [p.name for p in discovery.inventory()[KEY].pods] == ["demo-1", "demo-2"]
    assert "removed runtimes default/modelmesh-serving-other" in caplog.text, caplog.text
    assert "added pods default/modelmesh-serving-demo/demo-2" in caplog.text, caplog.text
    assert "removed pods default/modelmesh-serving-demo/demo-0" in caplog.text, caplog.text


async def test_a_reload_that_moves_a_pod_to_another_url_says_so_without_its_password(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "autoscaler.sources.targets")
    path, discovery = await started(tmp_path, targets("demo-0", "demo-1"))
    moved = targets("demo-0", "demo-1").replace(
        "{name: demo-1, url: 'http://127.0.0.1:1/metrics'}", "{name: demo-1, url: 'https://me:s3cret@10.0.0.7:9443/metrics'}")
    touch_later(path, moved, 1)

    assert [p.url for p in discovery.inventory()[KEY].pods][1] == "https://me:s3cret@10.0.0.7:9443/metrics"
    [line] = [record.getMessage() for record in caplog.records if "read again" in record.getMessage()]
    assert line.endswith(": pods with a changed URL default/modelmesh-serving-demo/demo-1 (http://127.0.0.1:1/metrics "
                         "-> https://me:***@10.0.0.7:9443/metrics)"), line
    assert "s3cret" not in caplog.text


async def test_a_reload_that_only_edits_a_runtimes_annotations_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "autoscaler.sources.targets")
    path, discovery = await started(tmp_path, targets("demo-0"))
    touch_later(path, targets("demo-0").replace(
        "    pods:", "    annotations: {autoscaler.modelmesh.io/min-replicas: '2'}\n    pods:"), 1)

    assert discovery.inventory()[KEY].annotations == {"autoscaler.modelmesh.io/min-replicas": "2"}
    [line] = [record.getMessage() for record in caplog.records if "read again" in record.getMessage()]
    assert line.endswith(": runtimes with changed annotations default/modelmesh-serving-demo"), line
