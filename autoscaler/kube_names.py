"""Kubernetes object names as the API server checks them, for what users write by hand (flags, the targets
file, the policy file): a runtime named in a namespace that cannot exist is one no HPA ever asks for, and was
served (or matched nothing) without a word, while `--namespaces` refused the same name at start."""

from __future__ import annotations

from exporter.env_flags import DNS_LABEL, DNS_SUBDOMAIN


def runtime_key_problem(namespace: str, deployment: str) -> str | None:
    """What is wrong with a runtime's namespace or Deployment name as written, or None."""
    if not DNS_LABEL.fullmatch(namespace):
        return (f"namespace {namespace!r} cannot exist (a namespace name has lower-case letters, digits and '-', "
                "at most 63)")
    if not DNS_SUBDOMAIN.fullmatch(deployment):
        return (f"deployment {deployment!r} cannot exist (a Deployment name has lower-case letters, digits, '-' "
                "and '.', at most 253)")
    return None
