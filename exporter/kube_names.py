"""Kubernetes names as the API server checks them, said once for both programs.

A name that cannot exist is no error anywhere in Kubernetes: a list in a namespace that cannot exist answers
no objects, the kubelet finds no pod of a name no pod can have. So every name a person writes (a flag, the
targets file, the policy file) or a template fills in (the downward API's) is checked here, and every refusal
tells the same rule in the same words. In `exporter` for the reason `env_flags` is: the adapter may import the
exporter, never the other way round. The standard library alone.
"""

from __future__ import annotations

import re
from typing import Final

DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""A DNS-1123 label: what a Kubernetes namespace name is."""
DNS_SUBDOMAIN: Final = re.compile(r"(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A DNS-1123 subdomain, at most 253 characters: what a pod's, a Deployment's and a Lease's name is (`fullmatch`)."""

NAMESPACE_RULE: Final = "lower-case letters, digits and '-', at most 63"
"""What a namespace name may have, as a refusal says it."""
OBJECT_NAME_RULE: Final = "lower-case letters, digits, '-' and '.', at most 253"
"""What a pod's, a Deployment's or a Lease's name may have, as a refusal says it."""


def namespace_problem(name: str) -> str | None:
    """The rule `name` breaks as a namespace name (`NAMESPACE_RULE`), or None when such a namespace can exist."""
    return None if DNS_LABEL.fullmatch(name) else NAMESPACE_RULE


def object_name_problem(name: str) -> str | None:
    """The rule `name` breaks as an object's name (`OBJECT_NAME_RULE`), or None when such an object can exist."""
    return None if DNS_SUBDOMAIN.fullmatch(name) else OBJECT_NAME_RULE
