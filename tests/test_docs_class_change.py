"""The steps the docs give to move a ServingRuntime between modelmesh-serving's own `hpa` autoscaler class and a
RuntimeScale, run as a user runs them: the README's shell lines, through bash and the real kubectl, against the fake
API with the modelmesh-serving controller's stand-in beside it (`tests/support/modelmesh_serving.py`).

Removing the annotation alone (what every surface said) set a runtime its CPU HPA had at 5 to `podsPerRuntime`
(2) at once: the controller applies `spec.replicas`, else `podsPerRuntime`, on the change itself. And going back
to class `hpa` while `spec.replicas` is set is refused by the controller's webhook. Each step the docs give must be
one patch the webhook admits, that removes no pod; and every surface that tells the fix (README, operations.md,
design.md, the alert, the RuntimeScale's message) must tell that step."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.actuation.bridge_status import verdict
from tests.fakes.kube import FakeKubeApi
from tests.support import modelmesh_serving

REPO = Path(__file__).resolve().parent.parent
NS = "modelmesh-serving"
RUNTIME = "triton"
DEPLOYMENT = "modelmesh-serving-triton"
CLASS = modelmesh_serving.CLASS_ANNOTATION
RUNNING = 5


def readme() -> str:
    return (REPO / "README.md").read_text()


def shell_block(text: str, containing: str) -> str:
    """The one ```sh block of `text` that contains `containing`."""
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", text, re.S) if containing in b]
    assert len(blocks) == 1, f"{len(blocks)} shell blocks contain {containing!r}"
    return str(blocks[0])


async def run_as_documented(tmp_path: Path, block: str, *, annotations: dict[str, str], replicas: int | None
                            ) -> tuple[list[int], dict[str, Any]]:
    """`block` run by bash (kubectl on PATH, the fake as its cluster), the runtime starting with `annotations` and
    `replicas` and its Deployment at `RUNNING`, the controller reconciling every 20 ms; returns the Deployment's
    replicas at each change and the ServingRuntime afterwards."""
    resized: list[int] = []
    async with FakeKubeApi() as kube:
        kube.add_serving_runtime(NS, RUNTIME, replicas=replicas, annotations=annotations)
        kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=RUNNING)
        assert modelmesh_serving.webhook_refusal(kube.stored("servingruntimes", NS, RUNTIME)) is None
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS)

        async def controller() -> None:
            while True:
                if (changed := modelmesh_serving.reconcile(kube, NS, RUNTIME, DEPLOYMENT)) is not None:
                    resized.append(changed)
                await asyncio.sleep(0.02)

        task = asyncio.create_task(controller())
        try:
            done = await asyncio.to_thread(subprocess.run, ["bash", "-euo", "pipefail", "-c", block],
                                           capture_output=True, text=True, timeout=60,
                                           env={**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)})
            assert done.returncode == 0, done.stderr
            await asyncio.sleep(0.2)  # ten of the controller's reconciles after the change
        finally:
            task.cancel()
        return resized, kube.stored("servingruntimes", NS, RUNTIME)


async def test_the_readmes_move_off_the_class_keeps_every_pod(tmp_path: Path) -> None:
    block = shell_block(readme(), f'"{CLASS}":null')
    resized, runtime = await run_as_documented(tmp_path, block, annotations={CLASS: "hpa"}, replicas=None)

    assert resized == [], f"the Deployment went {RUNNING} -> {resized}"
    assert modelmesh_serving.webhook_refusal(runtime) is None
    assert CLASS not in runtime["metadata"].get("annotations", {})
    assert runtime["spec"]["replicas"] == RUNNING


async def test_the_readmes_way_back_to_class_hpa_is_admitted_and_keeps_every_pod(tmp_path: Path) -> None:
    """After uninstalling, the runtime has the `spec.replicas` the adapter last wrote: the webhook refuses class
    `hpa` beside them, so the step removes them in the same patch."""
    block = shell_block(readme(), f'"{CLASS}":"hpa"')
    resized, runtime = await run_as_documented(tmp_path, block, annotations={}, replicas=RUNNING)

    assert modelmesh_serving.webhook_refusal(runtime) is None, "the webhook refuses it"
    assert resized == [], f"the Deployment went {RUNNING} -> {resized}"
    assert runtime["metadata"]["annotations"][CLASS] == "hpa"
    assert "replicas" not in runtime["spec"]


def patch_json(text: str) -> object:
    """The JSON of the `-p` argument of the first class-removing `kubectl patch` in `text`, `$N` read as 5."""
    found = re.search(r"""-p\s+'(\{"metadata":\{"annotations":\{"serving\.kserve\.io/autoscalerClass":null.*?)'\s*$""",
                      text.replace("'\"$N\"'", str(RUNNING)), re.M)
    assert found, text
    return json.loads(found.group(1).replace(":N}", f":{RUNNING}}}"))


def test_the_message_and_the_docs_give_the_same_patch() -> None:
    """The RuntimeScale's message (the number filled in), the README's lines and operations.md's one-liner."""
    scale = {"metadata": {"namespace": NS, "name": RUNTIME}, "spec": {"servingRuntime": RUNTIME}}
    runtime = {"metadata": {"annotations": {CLASS: "hpa"}}, "spec": {}}
    deployment = {"spec": {"replicas": RUNNING}}
    message = verdict(scale, runtime, deployment).message
    wanted = {"metadata": {"annotations": {CLASS: None}}, "spec": {"replicas": RUNNING}}

    assert patch_json(message) == wanted, message
    assert patch_json(shell_block(readme(), f'"{CLASS}":null')) == wanted
    operations = (REPO / "docs" / "operations.md").read_text()
    one_liner = re.search(r"`(kubectl -n NS patch\s+servingruntime NAME[^`]*autoscalerClass\":null[^`]*)`", operations)
    assert one_liner, "operations.md gives no one-patch command for AutoscalerClassConflict"
    assert patch_json(" ".join(one_liner.group(1).split())) == wanted


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("where", ["README.md", "docs/operations.md", "docs/design.md"])
def test_every_doc_that_tells_the_fix_tells_the_one_patch(where: str) -> None:
    text = flat((REPO / where).read_text())
    assert "remove the annotation)" not in text  # the old, whole fix
    assert "AutoscalerClassConflict" in text or "autoscaler class" in text, where
    step = r"(remove|removes) the annotation and (set|sets) `spec\.replicas` to the replicas"
    assert re.search(step, text, re.I), where


@pytest.mark.parametrize("rules", ["rules.yaml", "prometheus-rule.yaml"])
def test_the_alert_tells_the_one_patch(rules: str) -> None:
    shipped = yaml.safe_load((REPO / "manifests" / "examples" / "prometheus" / rules).read_text())
    groups = shipped["spec"]["groups"] if "spec" in shipped else shipped["groups"]
    [rule] = [r for g in groups for r in g["rules"] if r.get("alert") == "ModelMeshRuntimeScaleNotReady"]
    text = flat(rule["annotations"]["description"])
    branch = text[text.index('"AutoscalerClassConflict"'):text.index('"ServingRuntimeNotFound"')]
    assert "remove the annotation and set spec.replicas to the replicas its Deployment runs in ONE patch" in branch
    assert "podsPerRuntime" in branch
