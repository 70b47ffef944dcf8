"""The sidecar of a runtime of your own runs the image you built, as the install guide's steps leave it.

The walk-through builds and pushes an image of your own and sets it with `kustomize edit set image` in
`manifests/base` and `manifests/examples`. That reaches the adapter and the example runtime's sidecar, but not a
runtime of your own: operations.md patched that one with `kubectl patch --patch-file
manifests/examples/exporter-sidecar-patch.yaml`, a file kustomize never rewrites, so every pod of the runtime
rolled onto `ghcr.io/modelmesh-autoscaler/modelmesh-autoscaler:0.1.0`, an image the user never pushed
(ImagePullBackOff, the runtime's rollout stuck). The guide's block is run here as written, against the example
ServingRuntime with `kubectl patch --local`, the real kubectl, no cluster.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import yaml

from tests.manifests.support import EXAMPLES, KUBECTL, REPO, Object

OPERATIONS = REPO / "docs" / "operations.md"
MY_IMAGE = "registry.test/platform/modelmesh-autoscaler:9.9.9"
PLACEHOLDER = "ghcr.io/modelmesh-autoscaler/modelmesh-autoscaler"


def sidecar_block() -> str:
    """The first shell block of 'Per runtime: the exporter sidecar', without the line that names the image: the
    reader sets IMAGE to their own."""
    section = OPERATIONS.read_text().split("### 2. Per runtime: the exporter sidecar", 1)[1].split("\n### ", 1)[0]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match, "the section shows no command"
    return "\n".join(line for line in match.group(1).splitlines() if not line.startswith("IMAGE="))


def kubectl_on_the_example(tmp_path: Path) -> Path:
    """A `kubectl` first on PATH that runs `kubectl -n NS patch servingruntime NAME ARGS` as the real kubectl's
    `patch --local` of the example ServingRuntime, printing the result."""
    shim = tmp_path / "bin" / "kubectl"
    shim.parent.mkdir()
    shim.write_text(f"""#!/bin/bash
set -euo pipefail
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) shift 2 ;;
    patch) shift ;;
    servingruntime) shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
exec {KUBECTL} patch --local -f {EXAMPLES / "servingruntime-triton.yaml"} -o yaml "${{args[@]}}"
""")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return shim.parent


def patched_example(script: str, tmp_path: Path, failure: str = "") -> tuple[Object, Object]:
    """Run `script` as a reader would (bash -euo pipefail, from the repository root, IMAGE set to MY_IMAGE) with
    `kubectl_on_the_example` first on PATH: (the patched example ServingRuntime, its sidecar container). A failing
    script fails the test, its stderr after `failure`."""
    env = {**os.environ, "PATH": f"{kubectl_on_the_example(tmp_path)}:{os.environ['PATH']}", "IMAGE": MY_IMAGE}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, failure + done.stderr
    runtime = yaml.safe_load(done.stdout)
    [sidecar] = [c for c in runtime["spec"]["containers"] if c["name"] == "autoscaler-exporter"]
    return runtime, sidecar


def test_the_guide_patches_a_runtime_of_your_own_with_your_image(tmp_path: Path) -> None:
    _, sidecar = patched_example(sidecar_block(), tmp_path)
    assert sidecar["image"] == MY_IMAGE, f"the guide's command runs {sidecar['image']}, not the image you built"


def test_the_patch_file_names_the_image_the_guide_replaces() -> None:
    """The guide's substitution matches the image line of the patch file, whatever its tag."""
    [line] = [line.strip() for line in (EXAMPLES / "exporter-sidecar-patch.yaml").read_text().splitlines()
              if line.strip().startswith("image:")]
    assert line.startswith(f"image: {PLACEHOLDER}:"), line
