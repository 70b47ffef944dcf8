"""Client CAs reloaded without a restart: the front-proxy (requestheader) CA and the client CA, from their
files or from `kube-system/extension-apiserver-authentication`, re-read every `interval_s`.

Why: a cluster rotates its front-proxy CA (kubeadm certificate renewal, managed clusters on their schedule),
and publishes both the old and the new CA in the ConfigMap during the rotation. An adapter that read the CA
once would refuse the aggregator's new client certificate, and every HPA request, until restarted.

What changes on a reload: the CAs that decide which client certificates authenticate (the inspector's bundles,
checked on every request; a CA that was dropped stops authenticating at once) and the TLS context's trust
store, which can only grow (OpenSSL has no removal), so a dropped CA still completes a handshake but no longer
authenticates. What needs a restart, and is logged as such: a CA that appears or disappears entirely (the
authenticators are chosen at start). Changed front-proxy header rules or allowed names apply from the next
request, on connections already open too, as k8s.io/apiserver's DynamicRequestHeaderController applies them:
narrowing the allowed names is what a cluster does after a front-proxy client certificate leaked, and must not
wait for a restart. A source that cannot be read, or holds a broken bundle, keeps the current CAs and rules.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from autoscaler.api import authconfig
from autoscaler.api.authconfig import AuthConfigError, AuthenticationConfig
from autoscaler.api.authn import RequestHeaderAuthenticator
from autoscaler.api.client_certs import ClientCertificateInspector, trust_client_certificates
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.reviews import KubeAuthApi
from autoscaler.settings import ServeSettings

log = logging.getLogger(__name__)


def _pems(config: AuthenticationConfig) -> tuple[str | None, str | None]:
    return (config.requestheader_ca.pem if config.requestheader_ca else None,
            config.client_ca.pem if config.client_ca else None)


class ClientCaReloader:
    """Re-reads the client CAs and swaps them in; `run()` as a task, or `check()` once."""

    def __init__(self, settings: ServeSettings, kube: KubeAuthApi, tls: ssl.SSLContext | None,
                 inspector: ClientCertificateInspector, current: AuthenticationConfig,
                 *, requestheader: RequestHeaderAuthenticator | None = None, interval_s: float = 60.0) -> None:
        """`requestheader`: the front-proxy authenticator whose header rules and allowed names a reload swaps
        (None: there is none, the adapter started without a front-proxy CA)."""
        self._settings = settings
        self._kube = kube
        self._tls = tls
        self._inspector = inspector
        self._requestheader = requestheader
        self._current = current
        self._interval_s = interval_s
        self._warned: set[str] = set()

    async def check(self) -> bool:
        """Read the CAs and the front-proxy rules again; True when new ones were swapped in."""
        try:
            new = await authconfig.resolve(self._settings, self._kube)
        except (AuthConfigError, KubeApiError, OSError) as error:
            self._warn_once(f"read:{error}", f"client CAs not re-read, keeping the current ones: {error}")
            return False
        rules_changed = False
        if self._requestheader is not None and new.rules != self._current.rules:
            self._requestheader.replace_rules(new.rules)
            log.info("front-proxy header rules and allowed names reloaded from %s: allowed names %s", new.source,
                     ", ".join(sorted(new.rules.allowed_names)) or "any")
            rules_changed = True
        if _pems(new) == _pems(self._current):
            if not rules_changed:
                return False
        else:
            for which, old_ca, new_ca in (("front-proxy (requestheader)", self._current.requestheader_ca,
                                           new.requestheader_ca), ("client", self._current.client_ca, new.client_ca)):
                if (old_ca is None) != (new_ca is None):
                    self._warn_once(f"presence:{which}:{new_ca is None}", f"the {which} CA was added or removed in "
                                    f"{new.source}: restart the adapter to authenticate accordingly")
            if self._tls is not None:
                trust_client_certificates(self._tls, new.requestheader_ca, new.client_ca)
            log.info("client CAs reloaded from %s", new.source)
        # New CAs or new rules: a connection's identity, kept from its certificate or its headers, is judged anew.
        self._inspector.replace(new.requestheader_ca, new.client_ca)
        self._current = new
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.check()
            except Exception:
                log.exception("reloading the client CAs failed; keeping the current ones")

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s", message)
