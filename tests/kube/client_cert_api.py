"""`ClientCertKubeApi`: the shared fake kube API (`tests.fakes.kube.FakeKubeApi`) authenticating by client
certificate, as kube-apiserver's x509 authenticator does, and a credential plugin that hands certificates out.

The server asks every TLS client for a certificate signed by its client CA (`client_ca`) and answers 401
Unauthorized to a request whose connection presented none, one past its `notAfter` by the server's clock
(`cert_clock`, stepped by tests), or one whose serial was revoked. Like the real authenticator it judges the
certificate of the connection at each request: a kept-alive connection opened with an old certificate is
refused once that certificate expires, even if the client has a new one.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import ssl
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trustme
import yaml
from aiohttp import web

from tests.fakes.kube import FakeKubeApi
from tests.fakes.kube.wire import ApiError
from tests.support.certificates import issue_cert
from tests.support.waiting import eventually


class ClientCertKubeApi(FakeKubeApi):
    """A TLS fake kube API that authenticates by client certificate; see the module docstring."""

    def __init__(self, cert_clock: Callable[[], float] = time.time) -> None:
        super().__init__(tls=True)
        self.client_ca = trustme.CA()
        self.cert_clock = cert_clock
        self.revoked: set[int] = set()
        self.serials: list[int] = []
        """The serial of the certificate each authenticated request came with, in order."""

    def issue(self, name: str, not_after: float) -> trustme.LeafCert:
        """A client certificate for user `name` that this server accepts until `not_after` (Unix time)."""
        return issue_cert(
            self.client_ca, common_name=name, not_before=datetime.fromtimestamp(time.time() - 3600, UTC),
            not_after=datetime.fromtimestamp(not_after, UTC))

    def _make_tls(self) -> ssl.SSLContext:
        context = super()._make_tls()
        context.verify_mode = ssl.CERT_OPTIONAL  # as kube-apiserver: a client without one may still use a token
        self.client_ca.configure_trust(context)
        return context

    def _authenticate(self, request: web.Request) -> None:
        transport = request.transport
        peer: Any = transport.get_extra_info("peercert") if transport is not None else None
        if not peer:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        serial = int(peer["serialNumber"], 16)
        if ssl.cert_time_to_seconds(peer["notAfter"]) <= self.cert_clock() or serial in self.revoked:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        self.serials.append(serial)


def serial_of(cert: trustme.LeafCert) -> int:
    from cryptography import x509

    return x509.load_pem_x509_certificate(cert.cert_chain_pems[0].bytes()).serial_number


class CertificatePlugin:
    """A kubeconfig exec plugin (client.authentication.k8s.io/v1) that prints the ExecCredential in `credential`
    (`hand_out` writes it; no file makes the plugin fail) and appends a line to `runs` at each run. While
    `held` (`hold()` until `release()`), a run waits before it answers: a plugin that asks a remote CA (Teleport's
    proxy) or runs on a loaded node, as slow as a test needs, without a sleep to guess."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.credential = folder / "credential.json"
        self._runs = folder / "runs"
        self._held = folder / "held"
        self.script = folder / "plugin.py"
        self.script.write_text(
            "import pathlib, sys, time\n"
            f"with open({str(self._runs)!r}, 'a') as runs: runs.write('run\\n')\n"
            f"while pathlib.Path({str(self._held)!r}).exists(): time.sleep(0.01)\n"
            f"credential = pathlib.Path({str(self.credential)!r})\n"
            "if not credential.exists(): sys.exit('plugin: not logged in')\n"
            "print(credential.read_text())\n"
        )

    def hand_out(self, cert: trustme.LeafCert, expires: float) -> None:
        status = {"clientCertificateData": cert.cert_chain_pems[0].bytes().decode(),
                  "clientKeyData": cert.private_key_pem.bytes().decode(),
                  "expirationTimestamp": datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        self.credential.write_text(json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                                               "kind": "ExecCredential", "status": status}))

    def hand_out_token(self, token: str, expires: float) -> None:
        """Hand out a bearer token instead (`aws eks get-token`, `gke-gcloud-auth-plugin`), valid until `expires`."""
        status = {"token": token,
                  "expirationTimestamp": datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        self.credential.write_text(json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                                               "kind": "ExecCredential", "status": status}))

    def sign_each_run(self, authority: trustme.CA, lifetime_s: float) -> None:
        """From now on each run signs a new certificate with `authority`, valid for `lifetime_s` seconds from
        the run (real time: for a process whose clock a test cannot step); `hold()` holds these runs too."""
        ca_cert, ca_key = self.folder / "ca.crt", self.folder / "ca.key"
        authority.cert_pem.write_to_path(str(ca_cert))
        authority.private_key_pem.write_to_path(str(ca_key))
        self.script.write_text(
            "import datetime, json, pathlib, time\n"
            "from cryptography import x509\n"
            "from cryptography.hazmat.primitives import hashes, serialization\n"
            "from cryptography.hazmat.primitives.asymmetric import ec\n"
            "from cryptography.x509.oid import NameOID\n"
            f"with open({str(self._runs)!r}, 'a') as runs: runs.write('run\\n')\n"
            f"while pathlib.Path({str(self._held)!r}).exists(): time.sleep(0.01)\n"
            f"ca = x509.load_pem_x509_certificate(pathlib.Path({str(ca_cert)!r}).read_bytes())\n"
            f"ca_key = serialization.load_pem_private_key(pathlib.Path({str(ca_key)!r}).read_bytes(), None)\n"
            "key = ec.generate_private_key(ec.SECP256R1())\n"
            "now = datetime.datetime.now(datetime.UTC)\n"
            f"expires = now + datetime.timedelta(seconds={lifetime_s!r})\n"
            "cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "
            "'adapter')])).issuer_name(ca.subject).public_key(key.public_key())"
            ".serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))"
            ".not_valid_after(expires).sign(ca_key, hashes.SHA256()))\n"
            "status = {'clientCertificateData': cert.public_bytes(serialization.Encoding.PEM).decode(),\n"
            "          'clientKeyData': key.private_bytes(serialization.Encoding.PEM, "
            "serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode(),\n"
            "          'expirationTimestamp': expires.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
            "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
            "'status': status}))\n"
        )

    def hold(self) -> None:
        """Runs from now on wait, after counting themselves in `runs`, until `release()`."""
        self._held.touch()

    def release(self) -> None:
        self._held.unlink(missing_ok=True)

    @property
    def runs(self) -> int:
        return len(self._runs.read_text().splitlines()) if self._runs.exists() else 0

    def processes(self) -> list[int]:
        """The ids of this plugin's processes still running, as `ps` would list them."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    command = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:  # ended meanwhile
                    continue
                if str(self.script).encode() in command:
                    found.append(int(entry.name))
        return found

    async def all_ended(self) -> bool:
        """Whether this plugin's processes are all gone, or go within a generous wait: a killed process that the
        adapter did not start itself (the plugin a shell started) ends in its own time. A held run stays."""
        with contextlib.suppress(TimeoutError):
            await eventually(lambda: self.processes() == [])
        return self.processes() == []

    def exec_config(self, *, shell_wrapped: bool = False) -> dict[str, Any]:
        """A kubeconfig user's `exec` that runs this plugin (`kubeconfig` says what `shell_wrapped` means)."""
        command, args = sys.executable, [str(self.script)]
        if shell_wrapped:
            command, args = "/bin/sh", ["-c", f"{shlex.quote(sys.executable)} {shlex.quote(str(self.script))}; true"]
        return {"apiVersion": "client.authentication.k8s.io/v1", "command": command, "args": args,
                "interactiveMode": "Never"}

    def kubeconfig(self, kube: FakeKubeApi, namespace: str, *, shell_wrapped: bool = False) -> Path:
        """A kubeconfig for `kube` whose user's credential comes from this plugin; `shell_wrapped`: through a shell
        that runs it as its child rather than `exec` it (`sh -c 'aws eks get-token ...'`), so a run is two
        processes, of which `processes()` lists the plugin's."""
        path = kube.write_kubeconfig(self.folder / "kubeconfig", namespace=namespace)
        document = yaml.safe_load(path.read_text())
        document["users"][0]["user"] = {"exec": self.exec_config(shell_wrapped=shell_wrapped)}
        path.write_text(yaml.safe_dump(document))
        return path
