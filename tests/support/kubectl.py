"""The real `kubectl` against our servers: kubeconfigs and `get --raw`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

KUBECTL = "/usr/bin/kubectl"
KUBECTL_GC_OFF = {"GOGC": "off"}
"""Added to `get_raw`'s kubectl environment: Go's garbage collector off. A `get --raw` lives about 50 ms and reads
one small JSON body; the collections it ran in that time were a sixth of its CPU, 58 -> 48 ms a call (measured
against a running data path), where an end-to-end file such as test_missing_signal_e2e makes about 150 calls (a
fifth of that file's CPU). What kubectl sends and prints is the same."""


def write_kubeconfig(path: Path, server: str, *, token: str | None = "dev-token",
                     ca_pem: bytes | None = None, client_cert_pem: bytes | None = None,
                     client_key_pem: bytes | None = None) -> Path:
    """A kubeconfig for one server. With no credentials kubectl would prompt, so a token is the default."""
    import base64

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    cluster: dict[str, Any] = {"server": server}
    if ca_pem is None:
        cluster["insecure-skip-tls-verify"] = True
    else:
        cluster["certificate-authority-data"] = b64(ca_pem)
    user: dict[str, Any] = {}
    if client_cert_pem is not None and client_key_pem is not None:
        user["client-certificate-data"] = b64(client_cert_pem)
        user["client-key-data"] = b64(client_key_pem)
    elif token is not None:
        user["token"] = token
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "test", "cluster": cluster}],
        "users": [{"name": "test", "user": user}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "current-context": "test",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def get_raw(kubeconfig: Path, path: str, timeout: float = 20.0) -> tuple[int, Any]:
    """`kubectl get --raw PATH`: (exit code, parsed JSON body or kubectl's error text)."""
    with tempfile.TemporaryDirectory() as cache:
        result = subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", cache, "get", "--raw", path],
            capture_output=True, text=True, timeout=timeout, env={**os.environ, **KUBECTL_GC_OFF},
        )
    if result.returncode == 0:
        return 0, json.loads(result.stdout)
    return result.returncode, result.stderr


async def kubectl_error(kubeconfig: Path, path: str) -> str:
    """kubectl's error line for `get --raw PATH` (it must fail)."""
    code, said = await asyncio.to_thread(get_raw, kubeconfig, path)
    assert code != 0, said
    return str(said).strip()
