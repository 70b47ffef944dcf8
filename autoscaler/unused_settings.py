"""Settings of `serve` that do nothing beside others, named in a WARNING at start.

A user who gives `--client-ca-file` with `--insecure-dev`, `--leader-elect true` where nothing is written to
Kubernetes, or `--refresh-nice` with `--workers 0` believes the setting applies; it was taken without a word.
Warned, not refused (as the other source's settings, `autoscaler.preflight`): an adapter that starts today with
a leftover variable keeps starting after an upgrade. The exporters' TLS settings with a plain-http scrape are
here too: a user who gave `--exporter-server-name` believed the exporters' port was behind TLS. Each warning
names the setting as the user gave it, the flag or the `AUTOSCALER_*` variable (`ServeSettings.given_by`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Final

from autoscaler.actuation.writes_off import why_nothing_is_written
from autoscaler.log_lists import in_words
from autoscaler.serve_args import given_as
from autoscaler.settings import ServeSettings
from autoscaler.sources.targets import TargetsFileError, load_targets
from exporter.env_flags import overridden_said

AUTHENTICATION: Final = (
    "requestheader_client_ca_file", "requestheader_allowed_names", "requestheader_username_headers",
    "requestheader_group_headers", "requestheader_extra_headers_prefix", "client_ca_file",
    "authorization_always_allow_paths", "authentication_token_webhook_cache_ttl",
    "authorization_webhook_cache_authorized_ttl", "authorization_webhook_cache_unauthorized_ttl",
    "max_in_flight_reviews",
)
"""The settings (by flag dest) of authentication and authorization, which `--insecure-dev` does not do."""

EXPORTER_TLS: Final = ("exporter_server_name", "exporter_client_cert_file", "exporter_client_key_file")
"""The settings (by flag dest) of an https scrape of the exporters that nothing else asks for: the name their
certificates are verified against, the adapter's client certificate."""

LEASE: Final = ("leader_elect_lease_duration", "leader_elect_renew_deadline", "leader_elect_retry_period",
                "leader_elect_namespace", "leader_elect_lease_name")
"""The settings (by flag dest) of the Lease, used only where a leader is elected."""


def unused_settings(settings: ServeSettings) -> list[str]:
    """A warning for each group of given settings that these settings leave doing nothing."""
    given = {dest for dest, _ in settings.given_by}
    said_as = partial(given_as, settings)  # `--flag` or `AUTOSCALER_FLAG`, as the user gave it
    said = []
    if settings.insecure_dev and (names := [said_as(dest) for dest in AUTHENTICATION if dest in given]):
        said.append(f"{in_words(names)} {_does(names)} nothing with {said_as('insecure_dev')}, which serves without "
                    f"authentication or authorization: leave {_it(names)} out, or drop {said_as('insecure_dev')} to "
                    "authenticate and authorize clients")
    lease = [said_as(dest) for dest in LEASE if dest in given]
    if settings.leader_elect is False and lease:
        said.append(f"{in_words(lease)} {_does(lease)} nothing with {said_as('leader_elect')} false: no Lease is "
                    f"elected; leave {_it(lease)} out, or set {said_as('leader_elect')} true")
    elif (reason := why_nothing_is_written(settings)) is not None:
        electing = ([f"{said_as('leader_elect')} true"] if settings.leader_elect and "leader_elect" in given else [])
        if names := electing + lease:
            said.append(f"{in_words(names)} {_does(names)} nothing: a leader is elected to write to Kubernetes, and "
                        f"nothing is written here ({reason}): leave {_it(names)} out")
    exporter_tls = [said_as(dest) for dest in EXPORTER_TLS if dest in given]
    if settings.source == "scrape" and exporter_tls and (plain := _plain_http_only(settings)) is not None:
        fix = ("write https:// URLs in the targets file" if settings.targets is not None else
               f"give {said_as('exporter_scheme')} https, or auto (the default: https for pods whose exporter port "
               f"is named https-exporter)")
        said.append(f"{in_words(exporter_tls)} {_does(exporter_tls)} nothing: the exporters are scraped over plain "
                    f"http ({plain}), and {'it applies' if len(exporter_tls) == 1 else 'they apply'} only to an "
                    f"https scrape; leave {_it(exporter_tls)} out, or, where the exporters serve HTTPS (their "
                    f"--tls-cert-file), {fix}")
    if settings.workers == 0 and "refresh_nice" in given:
        said.append(f"{said_as('refresh_nice')} does nothing with {said_as('workers')} 0: the refresh shares the one "
                    "process with serving, so there is no refresh process to lower; leave it out, or give "
                    "--workers 1 or more for serving processes that run ahead of the refresh")
    return said + overridden_said(settings.overridden, said_as)


def _plain_http_only(settings: ServeSettings) -> str | None:
    """Why every exporter is scraped over plain http, or None where one may not be (an https URL, a scheme
    other than http, a targets file that does not read: `serve` names that one itself)."""
    if settings.targets is None:
        # `auto` (the default) scrapes a pod over https where its exporter port is named so: none is known yet
        return f"{given_as(settings, 'exporter_scheme')} http" if settings.exporter_scheme == "http" else None
    try:
        runtimes = load_targets(settings.targets)
    except (TargetsFileError, OSError):
        return None
    urls = [pod.url or "" for runtime in runtimes.values() for pod in runtime.pods]
    return None if any(url.startswith("https://") for url in urls) else "the targets file names http:// URLs only"


def _does(names: Sequence[str]) -> str:
    return "does" if len(names) == 1 else "do"


def _it(names: Sequence[str]) -> str:
    return "it" if len(names) == 1 else "them"
