"""A real adapter process for the hardening tests: `--insecure-dev` on loopback, runtimes from a targets file,
its log in a file the test reads back."""

from __future__ import annotations

import socket
import ssl
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support.processes import free_port, running

DEPLOYMENT = "modelmesh-serving-demo"


@dataclass
class Adapter:
    url: str
    port: int
    log: Path
    process: subprocess.Popen[bytes]

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def tls_socket(self) -> ssl.SSLSocket:
        """A raw TLS connection, for requests no HTTP client would send."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context.wrap_socket(socket.create_connection(("127.0.0.1", self.port), timeout=30))


def write_targets(path: Path, urls: Sequence[str], names: Sequence[str] | None = None) -> Path:
    pods = [{"name": name, "url": url} for name, url in zip(names or [f"pod-{i}" for i in range(len(urls))],
                                                            urls, strict=True)]
    path.write_text(yaml.safe_dump({"runtimes": [{"namespace": "default", "deployment": DEPLOYMENT,
                                                  "pods": pods}]}))
    return path


@contextmanager
def adapter_running(workdir: Path, exporter_urls: Sequence[str], args: Sequence[str] = (),
                    log_name: str = "adapter.log", fork: bool = True) -> Iterator[Adapter]:
    port = free_port()
    targets = write_targets(workdir / "targets.yaml", exporter_urls)
    log = workdir / log_name
    with running(["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
                  "--targets", str(targets), *args],
                 f"https://127.0.0.1:{port}/healthz", log, fork=fork) as process:
        yield Adapter(f"https://127.0.0.1:{port}", port, log, process)
