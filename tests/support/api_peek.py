"""Waiting for our API to answer something, then reading that answer with the real `kubectl get --raw`.

A kubectl run costs about 50 ms of CPU (a Go binary that asks the server's /version before the path), and an
end-to-end test that waited by running it every quarter second spent a second of CPU or more on answers it threw
away (tests/e2e/test_pod_ip_reuse: 60 runs in a test). The wait now asks the same URL with the kubeconfig's token
from this process (an HTTP GET, about a millisecond), and once that answer is the one awaited the test reads it with
kubectl, until kubectl's answer is too: what the test asserts is still what a user's kubectl shows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.support.kubectl import get_raw
from tests.support.processes import http_get, poll


def peek_raw(kubeconfig: Path, path: str, timeout: float = 20.0) -> tuple[int, Any]:
    """`get_raw`'s answer, read in this process: (0, the parsed JSON body) where the server answers 200, else the
    HTTP status and the body's text (kubectl's error line carries the same message), or -1 and why nothing answered.
    For waiting only: assert on `get_raw`'s (`kubectl_reads`)."""
    config = yaml.safe_load(kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    token = config["users"][0]["user"].get("token")
    try:
        status, body = http_get(server + path, timeout=timeout,
                                headers={"Authorization": f"Bearer {token}"} if token else None)
    except OSError as error:
        return -1, str(error)
    if status == 200:
        return 0, json.loads(body)
    return status, body


def kubectl_reads(kubeconfig: Path, path: str, wanted: Callable[[int, Any], object],
                  timeout: float = 60.0) -> tuple[int, Any]:
    """kubectl's (exit code, body or error text) for `get --raw path`, once `wanted(code, body)` holds of it: awaited
    with `peek_raw`, then read with kubectl (again until it holds, as it does at once unless the answer changed back
    meanwhile). `wanted` sees peek_raw's answers too: a JSON body where kubectl has its error line."""
    poll(lambda: wanted(*peek_raw(kubeconfig, path)), timeout=timeout)

    def read() -> tuple[int, Any] | None:
        answer = get_raw(kubeconfig, path)
        return answer if wanted(*answer) else None

    return poll(read, timeout=timeout)
