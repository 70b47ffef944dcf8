"""Where the authentication settings come from: flags and files, or the cluster's own ConfigMap.

kube-apiserver publishes its front-proxy settings in `kube-system/extension-apiserver-authentication`
(`client-ca-file`, `requestheader-client-ca-file` as PEM; `requestheader-allowed-names`,
`requestheader-username-headers`, `-group-headers`, `-extra-headers-prefix` and, from 1.32,
`-uid-headers` as JSON lists). When neither `--requestheader-client-ca-file` nor `--client-ca-file` is given,
the adapter reads that ConfigMap at start-up (RBAC: the `extension-apiserver-authentication-reader` Role),
retrying briefly; if it cannot be read the adapter does not start, since serving without knowing the front
proxy would mean refusing every HPA request. The header rules and allowed names are read once; the CAs are
read again every minute (`ca_reload`), so a rotated front-proxy CA needs no restart.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from autoscaler.api.authn import RequestHeaderRules
from autoscaler.api.client_certs import CertificateAuthorities, CertificateBundleError
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.reviews import KubeAuthApi
from autoscaler.settings import ServeSettings

log = logging.getLogger(__name__)

AUTH_CONFIG_MAP = ("kube-system", "extension-apiserver-authentication")
LOOKUP_ATTEMPTS = 4
LOOKUP_BACKOFF_S = 0.5


class AuthConfigError(ValueError):
    """The authentication settings cannot be determined; the message says what to change."""


@dataclass(frozen=True, slots=True)
class AuthenticationConfig:
    requestheader_ca: CertificateAuthorities | None
    client_ca: CertificateAuthorities | None
    rules: RequestHeaderRules
    source: str


def _bundle(path: Path | None, flag: str) -> CertificateAuthorities | None:
    if path is None:
        return None
    try:
        return CertificateAuthorities.from_pem(path.read_bytes(), f"{flag} {path}")
    except OSError as error:
        raise AuthConfigError(f"cannot read {flag} {path}: {error.strerror}") from error
    except CertificateBundleError as error:
        raise AuthConfigError(str(error)) from error


def from_settings(settings: ServeSettings) -> AuthenticationConfig:
    rules = RequestHeaderRules(
        allowed_names=frozenset(settings.requestheader_allowed_names),
        username_headers=settings.requestheader_username_headers,
        group_headers=settings.requestheader_group_headers,
        extra_headers_prefixes=settings.requestheader_extra_headers_prefix,
    )
    return AuthenticationConfig(
        _bundle(settings.requestheader_client_ca_file, "--requestheader-client-ca-file"),
        _bundle(settings.client_ca_file, "--client-ca-file"),
        rules,
        "flags",
    )


def _json_list(data: dict[str, str], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if key not in data:
        return default
    try:
        value = json.loads(data[key])
    except ValueError as error:
        raise AuthConfigError(f"{key} in ConfigMap {'/'.join(AUTH_CONFIG_MAP)} is not JSON: {error}") from error
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AuthConfigError(f"{key} in ConfigMap {'/'.join(AUTH_CONFIG_MAP)} is not a list of strings")
    return tuple(value)


def from_config_map(data: dict[str, str]) -> AuthenticationConfig:
    where = "ConfigMap " + "/".join(AUTH_CONFIG_MAP)
    try:
        requestheader_ca = (CertificateAuthorities.from_pem(data["requestheader-client-ca-file"], where)
                            if data.get("requestheader-client-ca-file") else None)
        client_ca = (CertificateAuthorities.from_pem(data["client-ca-file"], where)
                     if data.get("client-ca-file") else None)
    except CertificateBundleError as error:
        raise AuthConfigError(str(error)) from error
    defaults = RequestHeaderRules()
    rules = RequestHeaderRules(
        allowed_names=frozenset(_json_list(data, "requestheader-allowed-names", ())),
        username_headers=_json_list(data, "requestheader-username-headers", defaults.username_headers),
        group_headers=_json_list(data, "requestheader-group-headers", defaults.group_headers),
        extra_headers_prefixes=_json_list(data, "requestheader-extra-headers-prefix",
                                          defaults.extra_headers_prefixes),
        uid_headers=_json_list(data, "requestheader-uid-headers", ()),
    )
    return AuthenticationConfig(requestheader_ca, client_ca, rules, where)


async def resolve(settings: ServeSettings, kube: KubeAuthApi) -> AuthenticationConfig:
    """From the files when any CA file is given, else from the ConfigMap."""
    if settings.requestheader_client_ca_file is not None or settings.client_ca_file is not None:
        return from_settings(settings)
    namespace, name = AUTH_CONFIG_MAP
    for attempt in range(1, LOOKUP_ATTEMPTS + 1):
        try:
            data = await kube.read_config_map(namespace, name)
            break
        except KubeApiError as error:
            if attempt == LOOKUP_ATTEMPTS:
                raise AuthConfigError(
                    f"no --requestheader-client-ca-file or --client-ca-file given and ConfigMap {namespace}/{name} "
                    f"cannot be read: {error}") from error
            log.warning("reading ConfigMap %s/%s failed (%s); retrying", namespace, name, error)
            await asyncio.sleep(LOOKUP_BACKOFF_S * 2 ** (attempt - 1))
    if data is None:
        raise AuthConfigError(f"ConfigMap {namespace}/{name} does not exist: pass --requestheader-client-ca-file "
                              "(and --client-ca-file) instead")
    return from_config_map(data)
