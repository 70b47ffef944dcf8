"""docs/operations.md's "Trying it on your machine": its files and commands, run as written against a real adapter.

Nothing said how to point `kubectl` at a local `--insecure-dev` adapter: a reviewer had to find out that the
kubeconfig needs `insecure-skip-tls-verify: true` and a token (without credentials kubectl asks for a password).
The section's two files are written as the page gives them and its `kubectl` lines run as they stand, from that
directory; only the port (6443 there, one of this test's block here) and the exporter's URL (one that refuses
here: no exporter runs) differ.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kubectl import KUBECTL
from tests.support.ports import free_port
from tests.support.processes import start, stop, wait_until_logged

REPO = Path(__file__).resolve().parent.parent
OPERATIONS = (REPO / "docs" / "operations.md").read_text()
TITLE = "### Trying it on your machine (`--insecure-dev`)"
DOC_PORT = "6443"


def section() -> str:
    assert TITLE in OPERATIONS, "docs/operations.md lost its section on a local adapter"
    return OPERATIONS.split(TITLE, 1)[1].split("\n## ", 1)[0]


def debug_section() -> str:
    """What docs/operations.md says of the /debug/runtimes document."""
    return OPERATIONS.split("\n### /debug/runtimes: ", 1)[1].split("\n### ", 1)[0]


def files() -> dict[str, str]:
    """The section's YAML blocks by the file name their first line (a comment) gives."""
    blocks = re.findall(r"```yaml\n# (\S+)\n(.*?)```", section(), re.S)
    return dict(blocks)


def commands() -> list[str]:
    """The section's shell lines, in order."""
    [block] = re.findall(r"```sh\n(.*?)```", section(), re.S)
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


@pytest.fixture
def refusing_url() -> Iterator[str]:
    """An exporter URL whose port refuses: a socket bound there and not listening holds it for the test."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{bound.getsockname()[1]}/metrics"


def kubectl(line: str, folder: Path, port: int) -> subprocess.CompletedProcess[str]:
    """One `kubectl ...` line of the page, run as a shell runs it in `folder`, the page's port made `port`."""
    args = shlex.split(line.replace(DOC_PORT, str(port)))
    assert args[0] == "kubectl", line
    return subprocess.run([KUBECTL, *args[1:]], capture_output=True, text=True, cwd=folder, timeout=30,
                          env={**os.environ, "HOME": str(folder)})  # kubectl's cache in the test's folder


def test_the_pages_kubeconfig_and_commands_reach_a_local_adapter(tmp_path: Path, refusing_url: str) -> None:
    written = files()
    assert set(written) == {"targets.yaml", "local.kubeconfig"}, written
    port = free_port()
    for name, text in written.items():
        text = text.replace(DOC_PORT, str(port)).replace("http://127.0.0.1:9187/metrics", refusing_url)
        (tmp_path / name).write_text(text)
    serve, *reads = commands()
    assert serve.startswith("modelmesh-autoscaler serve ") and serve.endswith(" &"), serve
    assert len(reads) == 3 and all(line.startswith("kubectl --kubeconfig local.kubeconfig ") for line in reads)
    log = tmp_path / "adapter.log"
    cwd = Path.cwd()
    os.chdir(tmp_path)  # the page runs it from the files' directory (`--targets targets.yaml`)
    try:
        adapter = start(["autoscaler.cli", *shlex.split(serve.replace(DOC_PORT, str(port)))[1:-1]], log)
    finally:
        os.chdir(cwd)
    try:
        wait_until_logged(adapter, log, f"serving external.metrics.k8s.io on https://127.0.0.1:{port}")
        listing, debug, value = reads
        said = kubectl(listing, tmp_path, port)
        assert said.returncode == 0, said.stderr
        assert {r["name"] for r in json.loads(said.stdout)["resources"]} >= {"modelmesh_desired_replicas"}
        deadline = time.monotonic() + 60
        while (said := kubectl(debug, tmp_path, port)).returncode != 0:  # the first refresh
            assert time.monotonic() < deadline, said.stderr
            time.sleep(0.5)
        document = json.loads(said.stdout)
        assert document["key"] == {"namespace": "default", "deployment": "modelmesh-serving-demo"}
        described = debug_section()
        unsaid = [f"pods[].{name}" for name in document["pods"][0] if f"`{name}`" not in described]
        unsaid += [name for name in document if f"`{name}`" not in described]
        assert not unsaid, f"/debug/runtimes serves fields docs/operations.md does not describe: {unsaid}"
        said = kubectl(value, tmp_path, port)  # no exporter answers: the adapter's 503, not kubectl's own error
        assert said.returncode != 0 and "Error from server (ServiceUnavailable)" in said.stderr, said.stderr
    finally:
        stop(adapter)
