"""A renewed certificate is served by a sidecar whose filesystem is read-only, as the shipped sidecar patch runs
it (`readOnlyRootFilesystem: true`, no writable volume): the reloader used to copy the renewed pair into a
temporary directory first, which failed every 10 s ("No usable temporary directory found"), and the old
certificate was served until it expired.

Checked with the real exporter process in a mount namespace of its own where /tmp, /var/tmp, $TMPDIR and its
working directory are mounted read-only (`unshare --user --map-root-user`: no root needed where the kernel lets
users make namespaces; skipped where it does not), the certificate renewed as the kubelet swaps a Secret's
files, and the served certificate read with `openssl s_client` as an operator reads it."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.exporter.test_exporter_client_certificates import client_certificate, to_exporter
from tests.exporter.test_exporter_serving_tls import Pki, exporter_env, pki, served_subject
from tests.support.processes import free_port, poll, stop, wait_until_answers

__all__ = ["pki"]  # the fixture, taken from its module

MOUNT_NAMESPACE = ["unshare", "--user", "--map-root-user", "--mount"]


def read_only_namespace_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    tried = subprocess.run([*MOUNT_NAMESPACE, "sh", "-c", "mount --bind /tmp /tmp && mount -o remount,bind,ro /tmp"],
                           capture_output=True, check=False)
    return tried.returncode == 0


pytestmark = pytest.mark.skipif(not read_only_namespace_works(),
                                reason="needs `unshare --user --map-root-user --mount` (user namespaces allowed)")


def read_only_exporter(scratch: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """The exporter with every place Python's `tempfile` could write mounted read-only (the files outside stay
    visible, so the test can still renew the certificate and read the log)."""
    scratch.mkdir()
    places = [scratch, Path("/tmp"), Path("/var/tmp"), Path("/usr/tmp")]
    mounts = " && ".join(f"mount --bind {shlex.quote(str(place))} {shlex.quote(str(place))} && "
                         f"mount -o remount,bind,ro {shlex.quote(str(place))}" for place in places if place.is_dir())
    script = (f"{mounts} && ! touch {shlex.quote(str(scratch / 'writable'))} 2>/dev/null && "
              f"cd {shlex.quote(str(scratch))} && exec {shlex.quote(sys.executable)} -m exporter.cli")
    with open(log, "ab") as output:
        return subprocess.Popen([*MOUNT_NAMESPACE, "sh", "-c", script], stdout=output, stderr=subprocess.STDOUT,
                                env={**env, "TMPDIR": str(scratch)})


@pytest.mark.parametrize("client_ca", [False, True], ids=["serving-only", "with-client-ca"])
def test_a_renewed_certificate_is_served_on_a_read_only_filesystem(tmp_path: Path, pki: Pki, client_ca: bool) -> None:
    port = free_port()
    extra = {"EXPORTER_TLS_CLIENT_CA_FILE": str(pki.ca_file)} if client_ca else {}
    env = exporter_env(port, EXPORTER_TLS_CERT_FILE=str(pki.secret / "tls.crt"),
                       EXPORTER_TLS_KEY_FILE=str(pki.secret / "tls.key"), **extra)
    log = tmp_path / "exporter.log"
    process = read_only_exporter(tmp_path / "read-only", env, log)
    try:
        wait_until_answers(f"https://127.0.0.1:{port}/healthz", process, log)
        assert served_subject(port, pki.ca_file) == "first"
        pki.issue("renewed", "v2")
        poll(lambda: any(said in log.read_text() for said in ("reloaded from", "does not load")), timeout=60)
        assert "does not load" not in log.read_text(), log.read_text()
        assert served_subject(port, pki.ca_file) == "renewed"
        if client_ca:
            client = client_certificate(tmp_path, pki.authority, "adapter")
            assert to_exporter(f"https://localhost:{port}/metrics", pki, *client).stdout.endswith("\n200")
    finally:
        stop(process)
    said = log.read_text()
    assert f"serving certificate reloaded from {pki.secret / 'tls.crt'}" in said, said

