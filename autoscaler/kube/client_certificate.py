"""Keeping a kubeconfig exec plugin's client certificate current while the adapter runs.

A plugin may answer with a client certificate and key (`status.clientCertificateData` / `clientKeyData`, with
an `expirationTimestamp`) instead of a token: Teleport's `tsh`, Pinniped, in-house CAs; certificates of minutes
to hours. `kubernetes.aio` runs the plugin once, at load, and its REST client reads the certificate once into
each API client's TLS context, so from the certificate's expiry every call answered 401 Unauthorized until a
restart (its token refresh hook never runs either: there is no token). kubectl and client-go run the plugin
again at the expiry or after a 401, and close the connections the old certificate opened.

`watch_client_certificate` adds an aiohttp trace to the configuration, which every API client made from it carries.
Before each request, at the pace tokens keep too (`autoscaler.kube.renewal_pace`): once the certificate is within
`RENEW_BEFORE_S` (or a fifth of its lifetime, when shorter) of its expiry, the plugin runs again (at most every
`EXEC_RETRY_S` while it keeps failing); so it does after a 401, or a TLS failure (in TLS 1.3: a new connection
closed right after the handshake), at most every `EXEC_RETRY_S`. The
run is a task of its own: while the certificate is still valid and not refused, requests go on with it rather than
wait (a plugin asking a remote CA, or on a loaded node, took longer than the Lease renewal's deadline, and the
leader stopped writing a minute before its certificate expired); after that they wait for it, at most
`exec_plugin.SLOW_RUN_S` (a run longer than that is said once, naming the plugin's command), and one that gives up
(its deadline) leaves the run to finish for the next. A new certificate, checked against its key first, is loaded
into the client's TLS context and the idle connections the old one opened are closed. A response of 401 also closes
its connection. A refusal counts against the certificate the request's connection presented: a request that went out
with the certificate a renewal has since replaced, answered 401 after, says nothing of the new one (it marked the
new one refused, and the next calls waited for another run). A plugin that hands the refused certificate back is
said once, as for tokens (`refused_again`). When no new certificate can be had, requests go on with the last good
one and the reason is logged once per change, as a WARNING. Closing the API client (`exec_plugin.end_renewal`, as
the adapter stops) ends a run under way and the plugin's processes (`autoscaler.kube.exec_plugin`): a plugin waiting
on its CA or a login outlived the adapter.

The TLS context lives in aiohttp's connector (`_ssl`), the idle connections in its pool (`_conns`), and the
connection a short answer came on, once back in the pool, in the response (`_protocol`): all
private, read here only, so an aiohttp that changes them leaves the adapter as before (no reload, said once),
never broken.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import ssl
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
from cryptography import x509
from kubernetes.aio import client

from autoscaler.kube.exec_plugin import PluginRun, plugin_command, run_exec_plugin
from autoscaler.kube.raw import describe
from autoscaler.kube.refused_again import RefusedAgain
from autoscaler.kube.renewal_pace import RenewalPace
from autoscaler.kube.timestamps import posix_seconds
from autoscaler.kube.unauthorized import on_unauthorized

log = logging.getLogger("autoscaler.kube")

CLOCK: Callable[[], float] = time.time
"""Wall-clock time (expiry timestamps are wall-clock); tests step their own."""

def watch_client_certificate(loader: Any, configuration: client.Configuration) -> bool:
    """Renew `configuration`'s client certificate from the exec plugin of the kubeconfig user `loader` (the
    library's `KubeConfigLoader`) chose, when that plugin answered with a certificate. False when it did not."""
    entry = getattr(getattr(loader, "_user", None), "value", None)
    if not isinstance(entry, dict) or "exec" not in entry or getattr(loader, "token", None):
        return False
    cert_file, key_file = getattr(loader, "cert_file", None), getattr(loader, "key_file", None)
    if not isinstance(cert_file, str) or not isinstance(key_file, str) or configuration.cert_file != cert_file:
        return False
    renewal = PluginCertificate(loader._user["exec"], configuration, (cert_file, key_file),
                                x509.load_pem_x509_certificate(Path(cert_file).read_bytes()))
    configuration.trace_configs = [*(configuration.trace_configs or []), renewal.trace_config()]
    return True


def _expiry_of(certificate: x509.Certificate) -> float:
    return certificate.not_valid_after_utc.timestamp()


class _Warnings:
    """One WARNING per new reason the certificate cannot be renewed, one INFO when it can again."""

    def __init__(self) -> None:
        self._failing: str | None = None

    def failed(self, reason: str) -> None:
        if reason != self._failing:
            log.warning("Kubernetes credentials: cannot refresh the client certificate of the kubeconfig's exec "
                        "plugin, using the last certificate: %s", reason)
        self._failing = reason

    def recovered(self) -> None:
        if self._failing is not None:
            log.info("Kubernetes credentials: the exec plugin's client certificate is renewed again")
        self._failing = None


class PluginCertificate:
    """The current certificate of one exec plugin and the TLS contexts that carry it (one per API client)."""

    def __init__(self, exec_config: Any, configuration: client.Configuration, files: tuple[str, str],
                 certificate: x509.Certificate, clock: Callable[[], float] | None = None) -> None:
        """`files`: the certificate and key files the library wrote at load, which `configuration` names, and
        `certificate` the one they hold."""
        self._exec_config = exec_config
        self._configuration = configuration
        self._files = files
        self._certificate = certificate
        self._clock = clock or (lambda: CLOCK())
        self.pace = RenewalPace(self._clock, _expiry_of(certificate))
        command = plugin_command(exec_config)
        self.plugin_run = PluginRun(self._renew, "exec-plugin-certificate", command=command,
                                    credential="client certificate")
        self._refused_again = RefusedAgain(command, "client certificate",
                                           "refuses (401 Unauthorized, or in the TLS handshake)")
        self._generation = 0
        """Of the certificate in use: 0 the library's, then one more at each renewal."""
        self._loaded: weakref.WeakKeyDictionary[ssl.SSLContext, int] = weakref.WeakKeyDictionary()
        """The generation each API client's TLS context holds."""
        self._presented: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
        """The generation each connection (its protocol) presented in its handshake: a pooled connection keeps
        presenting the certificate it opened with, whatever its TLS context has loaded since."""
        self._folder: Path | None = None
        self._warnings = _Warnings()
        self._cannot_reload_said = False

    def trace_config(self) -> aiohttp.TraceConfig:
        trace = _RenewalTrace(self.plugin_run)
        trace.on_request_start.append(self._on_request_start)
        trace.on_connection_create_end.append(self._on_connection_create_end)
        trace.on_request_end.append(self._on_request_end)
        on_unauthorized(trace, self._on_unauthorized)
        trace.on_request_exception.append(self._on_request_exception)
        return trace

    async def _on_request_start(self, session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: Any) -> None:
        # A caller giving up leaves the run to the next request; a run ended by its client's close
        # (`end_renewal`) lets a caller of another client go on with the last certificate.
        await self.pace.before_request(self.plugin_run)
        self._load_current(session)
        ctx.generation = self._generation_in(session)  # what a connection opened for this request presents

    def _load_current(self, session: aiohttp.ClientSession) -> None:
        """Load the certificate in use into `session`'s TLS context, where it holds an older one."""
        if self._generation == 0:
            return  # the library's certificate, loaded by every client at its start
        context = getattr(session.connector, "_ssl", None)
        if isinstance(context, ssl.SSLContext) and self._loaded.get(context) == self._generation:
            return
        if not isinstance(context, ssl.SSLContext):
            if not self._cannot_reload_said:
                log.warning("Kubernetes credentials: this aiohttp keeps no TLS context where the adapter looks; the "
                            "renewed client certificate is used only by API clients made from now on")
                self._cannot_reload_said = True
            return
        context.load_cert_chain(*self._files)
        self._loaded[context] = self._generation
        _close_idle(session.connector)

    def _generation_in(self, session: aiohttp.ClientSession) -> int:
        """The generation `session`'s TLS context holds, which a connection it opens now presents."""
        context = getattr(session.connector, "_ssl", None)
        if not isinstance(context, ssl.SSLContext):
            return self._generation  # not known (said once): a refusal counts against the certificate in use
        return self._loaded.get(context, 0)

    def _presented_by(self, ctx: SimpleNamespace, protocol: object | None) -> int:
        """The generation of the certificate the request's connection (`protocol`) presented: noted when the
        request opened it (`_on_connection_create_end`), else as that connection's first request noted it."""
        if getattr(ctx, "new_connection", False):
            if protocol is not None:
                self._presented[protocol] = ctx.generation
            return int(ctx.generation)
        presented = self._presented.get(protocol) if protocol is not None else None
        return presented if presented is not None else int(getattr(ctx, "generation", self._generation))

    async def _on_request_end(self, _session: aiohttp.ClientSession, ctx: SimpleNamespace,
                              params: aiohttp.TraceRequestEndParams) -> None:
        self._presented_by(ctx, _protocol_of(params.response))  # noted for the requests that reuse the connection

    def _on_unauthorized(self, params: aiohttp.TraceRequestEndParams, ctx: SimpleNamespace) -> None:
        # Only a 401 to the certificate in use: one to a certificate already replaced (a request that went out
        # while the plugin ran, or a pooled connection opened before) says nothing of the new one.
        protocol = _protocol_of(params.response)
        if self._presented_by(ctx, protocol) == self._generation:
            self.pace.refused = True
        # It carries a certificate the server no longer takes: closed, never reused. A short answer has already
        # put its connection back in the pool (a force_close() there came too late, and the next request on it met
        # the same 401); one still being read is closed once read.
        if params.response.connection is not None and params.response.connection.protocol is not None:
            params.response.connection.protocol.force_close()
        elif protocol is not None and hasattr(protocol, "close"):
            protocol.close()

    async def _on_connection_create_end(self, session: aiohttp.ClientSession, ctx: SimpleNamespace,
                                        _params: object) -> None:
        ctx.new_connection = True
        ctx.generation = self._generation_in(session)  # another request may have loaded a newer one meanwhile

    async def _on_request_exception(self, _session: aiohttp.ClientSession, ctx: SimpleNamespace,
                                    params: aiohttp.TraceRequestExceptionParams) -> None:
        # A server that checks the certificate in the handshake refuses it there: a TLS error in TLS 1.2; in
        # TLS 1.3 the client's handshake is done first, and the refusal is a connection closed at once.
        error = params.exception
        refused = _is_tls_failure(error) or (getattr(ctx, "new_connection", False)
                                             and isinstance(error, aiohttp.ServerDisconnectedError))
        if refused and getattr(ctx, "generation", self._generation) == self._generation:
            self.pace.refused = True  # the certificate in use, not one already replaced

    async def _renew(self) -> str | None:
        self.pace.run_started()
        try:
            status = await run_exec_plugin(self._exec_config)
            certificate, cert, key, expiry = _certificate_in(status, self._clock())
            files = self._write(cert, key)  # a full or read-only /tmp: said and retried like a failed run
        except Exception as error:  # the library's and the plugin's errors end here: the last certificate stays
            self.pace.run_failed()
            reason = describe(error)
            self._warnings.failed(reason)
            return reason
        self._refused_again.renewed(refused=self.pace.refused, same=certificate == self._certificate)
        self._certificate = certificate
        old, self._files = self._files, files
        self._configuration.cert_file, self._configuration.key_file = self._files  # for clients made later
        if self._generation > 0:
            for path in old:  # ours; the first pair is the library's
                Path(path).unlink(missing_ok=True)
        self._generation += 1
        self.pace.renewed(expiry)
        self._warnings.recovered()
        log.debug("Kubernetes credentials: the exec plugin's client certificate is renewed, valid until %s",
                 datetime.fromtimestamp(expiry).astimezone().isoformat(timespec="seconds"))
        return None

    def _write(self, cert: bytes, key: bytes) -> tuple[str, str]:
        """The pair as private files (the TLS context loads only files), named by generation."""
        if self._folder is None or not self._folder.is_dir():  # a node's tmp cleaner may remove it in days
            self._folder = Path(tempfile.mkdtemp(prefix="modelmesh-autoscaler-kube-"))  # 0700
            atexit.register(shutil.rmtree, self._folder, True)  # no private key left behind by a clean exit
        paths = []
        for name, data in (("tls.crt", cert), ("tls.key", key)):
            path = self._folder / f"{self._generation + 1}-{name}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            paths.append(str(path))
        return paths[0], paths[1]


class _RenewalTrace(aiohttp.TraceConfig):
    """The requests' trace of one plugin's certificate, by which `end_renewal` finds its run on a configuration
    (the renewal lives as long as the configuration carries it, no longer)."""

    def __init__(self, plugin_run: PluginRun) -> None:
        super().__init__()
        self.plugin_run = plugin_run


def _certificate_in(status: Mapping[str, Any], now: float) -> tuple[x509.Certificate, bytes, bytes, float]:
    """The certificate (parsed, and as PEM), key and expiry a plugin's `status` holds; ValueError when they are
    missing, do not belong together, or are already expired."""
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if not isinstance(cert, str) or not isinstance(key, str) or not cert or not key:
        raise ValueError("the plugin's answer has no clientCertificateData and clientKeyData")
    with tempfile.TemporaryDirectory() as folder:
        cert_path, key_path = Path(folder, "tls.crt"), Path(folder, "tls.key")
        cert_path.write_text(cert)
        key_path.write_text(key)
        try:
            ssl.create_default_context().load_cert_chain(cert_path, key_path)
        except ssl.SSLError as error:
            raise ValueError(f"the plugin's certificate and key do not load: {error}") from error
    certificate = x509.load_pem_x509_certificate(cert.encode())
    expiry = _expiry_of(certificate)
    stated = status.get("expirationTimestamp")
    if stated:
        stated_s = posix_seconds(stated)
        if stated_s is None:
            raise ValueError(f"the plugin's expirationTimestamp {stated!r} is not a time")
        expiry = min(expiry, stated_s)
    if expiry <= now:
        raise ValueError(f"the plugin's certificate expired at {datetime.fromtimestamp(expiry).isoformat()}")
    return certificate, cert.encode(), key.encode(), expiry


def _is_tls_failure(error: BaseException) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLError | aiohttp.ClientSSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _protocol_of(response: aiohttp.ClientResponse) -> object | None:
    """The connection (its protocol) that carried `response`: the response keeps it (`_protocol`, private, read
    here only) after a short answer has put the connection back in the pool and `response.connection` is None."""
    protocol = getattr(response, "_protocol", None)
    if protocol is None and response.connection is not None:
        protocol = response.connection.protocol
    return protocol


def _close_idle(connector: Any) -> None:
    """Close the pooled connections (opened with the old certificate): the pool drops a closed one when it next
    looks. Those in use go back to the pool and serve until the server refuses them (a 401 closes its
    connection): the renewal comes minutes before the old certificate expires."""
    pool = getattr(connector, "_conns", None)
    if not isinstance(pool, Mapping):
        return
    for idle in pool.values():
        for entry in list(idle):
            protocol = entry[0] if isinstance(entry, tuple) and entry else None
            if protocol is not None and hasattr(protocol, "close"):
                protocol.close()
