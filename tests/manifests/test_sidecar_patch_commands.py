"""Every command the docs give for adding the sidecar to a runtime of your own runs the image you built.

`test_own_runtime_sidecar_image.py` runs operations.md's block. The same step is written in three more places a
user may follow instead: the README's walk-through (step 4), manifests/README.md's "Per runtime" list (step 1)
and the patch file's own comments. `kubectl patch --patch-file manifests/examples/exporter-sidecar-patch.yaml`
as it stands names `ghcr.io/modelmesh-autoscaler/modelmesh-autoscaler:0.1.0`, which `kustomize edit set image`
never rewrites and the user never pushed: every new pod of the runtime waits in ImagePullBackOff and its rollout
stops. Each command is run here as written, with IMAGE set as the walk-through has it, against the example
ServingRuntime with `kubectl patch --local` (the real kubectl, no cluster).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.manifests.support import EXAMPLES, REPO
from tests.manifests.test_own_runtime_sidecar_image import MY_IMAGE, patched_example

PATCH_FILE = "manifests/examples/exporter-sidecar-patch.yaml"
MARKDOWN = ("README.md", "docs/operations.md", "manifests/README.md")


def markdown_commands(text: str) -> list[str]:
    """Code spans and shell blocks that patch a ServingRuntime with the sidecar patch file, whitespace joined."""
    blocks = re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
    spans = re.findall(r"(?<!`)`([^`]+)`(?!`)", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    found = []
    for code in (*blocks, *spans):
        lines = [line for line in code.replace("\\\n", " ").splitlines() if not line.startswith("IMAGE=")]
        command = " ".join(" ".join(lines).split())
        if "exporter-sidecar-patch.yaml" in command and "patch servingruntime" in command:
            found.append(command)
    return found


def comment_commands(path: Path) -> list[str]:
    """The shell command in the patch file's comments (its indented lines, continuation lines joined)."""
    lines = [line[1:].strip() for line in path.read_text().splitlines() if line.startswith("#")]
    text = "\n".join(lines).replace("\\\n", " ")
    return [" ".join(line.split()) + (" " + " ".join(nxt.split()) if line.endswith("|") else "")
            for line, nxt in zip(text.splitlines(), [*text.splitlines()[1:], ""], strict=True)
            if PATCH_FILE in line and ("kubectl" in line or line.endswith("|"))]


def every_command() -> list[tuple[str, str]]:
    commands = [(doc, command) for doc in MARKDOWN for command in markdown_commands((REPO / doc).read_text())]
    commands += [(f"{PATCH_FILE} (comments)", command) for command in comment_commands(REPO / PATCH_FILE)]
    return commands


def test_each_place_that_adds_the_sidecar_gives_a_command() -> None:
    assert {doc for doc, _ in every_command()} == {*MARKDOWN, f"{PATCH_FILE} (comments)"}, every_command()


@pytest.mark.parametrize(("doc", "command"), every_command())
def test_the_command_runs_the_image_you_built(doc: str, command: str, tmp_path: Path) -> None:
    script = command.replace("NAME", "triton").replace(" NS ", " modelmesh-serving ")
    runtime, sidecar = patched_example(script, tmp_path, f"{doc}: {command}\n")
    assert runtime["metadata"]["name"] == yaml.safe_load((EXAMPLES / "servingruntime-triton.yaml").read_text())[
        "metadata"]["name"]
    assert sidecar["image"] == MY_IMAGE, f"{doc}: `{command}` runs {sidecar['image']}, not the image you built"
