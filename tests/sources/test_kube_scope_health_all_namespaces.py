"""Discovery of all namespaces (no `--namespaces`) says each policy-file runtime's namespace's health apart.

Its promise, for any policy-file runtimes and any of their namespaces whose Deployment read by name fails (RBAC's
403, a 500 for that namespace alone): `scope_health` gives `*` True while the watch of all namespaces and the list
of all Deployments work, and each runtime's namespace its own entry, False exactly where its read fails. Before, one
such read set `*` False, and `modelmesh_autoscaler_discovery_healthy{namespace="*"}` named the cluster; the real
`serve` and the shipped alert are in tests/e2e/test_all_namespaces_one_namespace_refused.py. The list of all
Deployments refused makes every scope False. The real `kubernetes.aio` client against the fake Kubernetes API.
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.aio.client import Configuration

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import ALL_NAMESPACES
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.fakes.kube import FakeKubeApi

NAMESPACES = ["team-a", "team-b", "team-c"]
DEPLOYMENT = "modelmesh-serving-triton"


async def health_after_start(configured: set[str], failing: dict[str, int], all_refused: bool) -> dict[str, bool]:
    """`scope_health` of discovery in all namespaces with a policy-file runtime in each of `configured`, once its
    first reads are done; `failing`: the status each namespace's read by name answers."""
    async with FakeKubeApi() as kube:
        for namespace in NAMESPACES:
            kube.add_modelmesh_runtime(namespace, DEPLOYMENT, replicas=1, ready_pods=0)
        for namespace, status in failing.items():
            if status == 403:
                kube.forbid("get", "deployments", namespace)
            else:
                kube.fail(f"/namespaces/{namespace}/deployments/", status, times=None, method="GET")
        if all_refused:
            kube.forbid("list", "deployments", None)
        client = Configuration()
        client.host = kube.url
        discovery = KubePodDiscovery(client, runtimes=[RuntimeKey(ns, DEPLOYMENT) for ns in sorted(configured)],
                                     request_timeout_s=2.0, backoff_initial_s=0.02, backoff_max_s=0.1)
        try:
            await discovery.start()  # returns once every first read was answered
            return discovery.scope_health()
        finally:
            await discovery.close()


@settings(max_examples=15, deadline=None)
@given(configured=st.sets(st.sampled_from(NAMESPACES)),
       failing=st.dictionaries(st.sampled_from(NAMESPACES), st.sampled_from([403, 500])),
       all_refused=st.booleans())
def test_each_policy_file_namespace_is_its_own_scope_and_the_cluster_stays_healthy(
        configured: set[str], failing: dict[str, int], all_refused: bool) -> None:
    health = asyncio.run(health_after_start(configured, failing, all_refused))

    assert health == {ALL_NAMESPACES: not all_refused,
                      **{ns: not all_refused and ns not in failing for ns in configured}}, health
