"""operations.md's "Rolling back to the previous release" describes ecc8de1, the release it names: what that release
takes, and what of this one it does not have (HTTPS on the exporters' port), from its settings captured in
tests/upgrade/ecc8de1-settings.yaml.

The section described c32c335 instead: it said ecc8de1 refuses `--refresh-interval=30s` and the PodResources socket
with `EXPORTER_POD_NAME`, which ecc8de1 takes (run in its checkout), and left out what does break: the exporter-tls
overlay's adapter flags (`error: unrecognized arguments`, the old replica never Ready), and the TLS patch on an
ecc8de1 sidecar (its variables ignored, plain HTTP on the port named `https-exporter`, an HTTPS liveness probe that
fails: the kubelet restarts it, the adapter's scrapes fail with `tls`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manifests.support import EXPORTER_TLS, container, find, kustomize

REPO = Path(__file__).resolve().parent.parent
OLD: dict[str, Any] = yaml.safe_load((REPO / "tests" / "upgrade" / "ecc8de1-settings.yaml").read_text())
TLS_PATCH: list[dict[str, Any]] = yaml.safe_load((EXPORTER_TLS / "exporter-tls-patch.yaml").read_text())


def rolling_back() -> str:
    text = (REPO / "docs" / "operations.md").read_text()
    start = text.index("**Rolling back to the previous release")
    return " ".join(text[start:text.index("**After upgrading**", start)].split())  # lines rewrapped


def overlay_flags_ecc8de1_lacks() -> list[str]:
    deployment = find(kustomize(EXPORTER_TLS), "Deployment", "modelmesh-autoscaler")
    adapter = container(deployment["spec"]["template"]["spec"], "adapter")
    flags = [arg.split("=")[0] for arg in adapter["args"] if arg.startswith("--")]
    return [flag for flag in flags if flag not in OLD["serve_flags"]]


def patch_variables_ecc8de1_ignores() -> list[str]:
    names = [op["value"]["name"] for op in TLS_PATCH if op["path"].endswith("/env/-")]
    return [name for name in names if name not in OLD["exporter_variables"]]


def test_the_section_names_the_release_it_describes() -> None:
    assert "ecc8de1" in rolling_back()


def test_there_are_flags_and_variables_to_tell() -> None:
    assert overlay_flags_ecc8de1_lacks() and patch_variables_ecc8de1_ignores()  # else the tests below check nothing


@pytest.mark.parametrize("flag", overlay_flags_ecc8de1_lacks())
def test_each_overlay_flag_ecc8de1_refuses_is_named(flag: str) -> None:
    assert flag in rolling_back()
    assert "unrecognized arguments" in rolling_back()


@pytest.mark.parametrize("variable", patch_variables_ecc8de1_ignores())
def test_each_tls_variable_an_ecc8de1_sidecar_ignores_is_named(variable: str) -> None:
    assert variable in rolling_back()
    assert f"{patch_variables_ecc8de1_ignores()[0]} is not a setting; ignored" in rolling_back()


def test_the_tls_patch_is_reverted_whole_in_the_edit_of_the_image() -> None:
    """Port name, variables and probe scheme: an ecc8de1 sidecar left with any of them fails its probe or its
    scrapes."""
    said = rolling_back()
    port = next(op["value"] for op in TLS_PATCH if op["path"].endswith("/ports/0/name"))
    scheme = next(op["value"] for op in TLS_PATCH if op["path"].endswith("/httpGet/scheme"))
    assert port in said and "`exporter`" in said
    assert scheme in said
    assert "same edit as the image" in said


@pytest.mark.parametrize("refusal", [
    "expected a number of seconds, got '30s'",  # ecc8de1 takes units on every seconds flag and variable
    "needs --gpu-pod-name (EXPORTER_GPU_POD_NAME)",  # ecc8de1 takes --pod-name with the socket
    "ignores `modelmesh_exporter_pod_info`",  # ecc8de1 reads it (its `other_pod`)
])
def test_the_section_quotes_no_refusal_of_another_release(refusal: str) -> None:
    assert refusal not in rolling_back()
