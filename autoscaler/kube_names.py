"""Kubernetes object names as the API server checks them, for what users write by hand (flags, the targets
file, the policy file): a runtime named in a namespace that cannot exist is one no HPA ever asks for, and was
served (or matched nothing) without a word, while `--namespaces` refused the same name at start."""

from __future__ import annotations

from exporter.kube_names import namespace_problem, object_name_problem


def runtime_key_problem(namespace: str, deployment: str) -> str | None:
    """What is wrong with a runtime's namespace or Deployment name as written, or None (the rules are
    `exporter.kube_names`', which the flags' checks say too)."""
    if (rule := namespace_problem(namespace)) is not None:
        return f"namespace {namespace!r} cannot exist (a namespace name has {rule})"
    if (rule := object_name_problem(deployment)) is not None:
        return f"deployment {deployment!r} cannot exist (a Deployment name has {rule})"
    return None
