"""Where the authentication settings come from: flags and files, or the cluster's own ConfigMap.

kube-apiserver publishes its front-proxy settings in `kube-system/extension-apiserver-authentication`
(`client-ca-file`, `requestheader-client-ca-file` as PEM; `requestheader-allowed-names`,
`requestheader-username-headers`, `-group-headers`, `-extra-headers-prefix` and, from 1.32,
`-uid-headers` as JSON lists). Each CA comes from its file where one is given, else from that ConfigMap, on its
own, as k8s.io/apiserver's `lookupMissingConfigInCluster` does: pinning the client CA with `--client-ca-file`
must not switch off the front proxy, the HPA's only way in. The header rules and allowed names go with the
requestheader CA: from the flags with `--requestheader-client-ca-file`, else from the ConfigMap.

The ConfigMap is read (RBAC: the `extension-apiserver-authentication-reader` Role) when a CA file is missing,
retrying briefly; if it cannot be read the adapter does not start, since serving without the missing CA would
refuse its clients (the HPA's aggregator, where it is the front-proxy CA). A ConfigMap that does not exist
stops the start only when no CA file was given. The header rules are read once; the CAs are read again every
minute (`ca_reload`), so a rotated CA needs no restart.
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
_WHERE = "ConfigMap " + "/".join(AUTH_CONFIG_MAP)
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
        raise AuthConfigError(f"{key} in {_WHERE} is not JSON: {error}") from error
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AuthConfigError(f"{key} in {_WHERE} is not a list of strings")
    return tuple(value)


def from_config_map(data: dict[str, str]) -> AuthenticationConfig:
    try:
        requestheader_ca = (CertificateAuthorities.from_pem(data["requestheader-client-ca-file"], _WHERE)
                            if data.get("requestheader-client-ca-file") else None)
        client_ca = (CertificateAuthorities.from_pem(data["client-ca-file"], _WHERE)
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
    return AuthenticationConfig(requestheader_ca, client_ca, rules, _WHERE)


async def resolve(settings: ServeSettings, kube: KubeAuthApi) -> AuthenticationConfig:
    """Each CA from its file, a CA without one from the ConfigMap (see the module's docstring)."""
    files = from_settings(settings)
    header_file, client_file = settings.requestheader_client_ca_file, settings.client_ca_file
    if header_file is not None and client_file is not None:
        return files
    if header_file is None and client_file is None:
        data = await _read_config_map(kube, "--requestheader-client-ca-file or --client-ca-file")
        if data is None:
            raise AuthConfigError(f"{_WHERE} does not exist: pass --requestheader-client-ca-file (and "
                                  "--client-ca-file) instead")
        return from_config_map(data)
    data = await _read_config_map(kube, "--client-ca-file" if client_file is None else
                                  "--requestheader-client-ca-file")
    return _completed(files, None if data is None else from_config_map(data),
                      header_from_file=header_file is not None)


def _completed(files: AuthenticationConfig, cluster: AuthenticationConfig | None, *,
               header_from_file: bool) -> AuthenticationConfig:
    """The CA of the one file given (`files`), the other from the ConfigMap (`cluster`; None where it does not
    exist). `source` says where each came from, for the start-up log line and the reloads'."""
    if header_from_file:
        flag, given = "--requestheader-client-ca-file", "front-proxy CA, header rules from the flags"
        missing, taken = "client CA", cluster.client_ca if cluster is not None else None
        requestheader_ca, client_ca, rules = files.requestheader_ca, taken, files.rules
        took = missing
    else:
        flag, given = "--client-ca-file", "client CA"
        missing, taken = "front-proxy CA", cluster.requestheader_ca if cluster is not None else None
        requestheader_ca, client_ca = taken, files.client_ca
        rules = cluster.rules if cluster is not None and taken is not None else files.rules
        took = "front-proxy CA, header rules"
    if cluster is None:
        source = f"{flag} ({given}; {_WHERE} does not exist: no {missing})"
    elif taken is None:
        source = f"{flag} ({given}) and {_WHERE} (no {missing} there)"
    else:
        source = f"{flag} ({given}) and {_WHERE} ({took})"
    return AuthenticationConfig(requestheader_ca, client_ca, rules, source)


async def _read_config_map(kube: KubeAuthApi, missing: str) -> dict[str, str] | None:
    """The ConfigMap's data (None: it does not exist), retried briefly; `missing` names the flags not given."""
    namespace, name = AUTH_CONFIG_MAP
    for attempt in range(1, LOOKUP_ATTEMPTS):
        try:
            return await kube.read_config_map(namespace, name)
        except KubeApiError as error:
            log.warning("reading %s failed (%s); retrying", _WHERE, error)
            await asyncio.sleep(LOOKUP_BACKOFF_S * 2 ** (attempt - 1))
    try:
        return await kube.read_config_map(namespace, name)
    except KubeApiError as error:
        raise AuthConfigError(f"no {missing} given and {_WHERE} cannot be read: {error}") from error
