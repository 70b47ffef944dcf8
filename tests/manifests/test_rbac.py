"""The adapter's RBAC, derived from the code's own calls: a real `serve` process runs against the fake
Kubernetes API with every part that talks to Kubernetes switched on (pod discovery, a configured runtime,
deletion costs, leader election, the replica bridge, bearer-token authentication and SubjectAccessReviews, the
authentication ConfigMap), and every request it makes becomes a (group, resource, verb, namespace) call.

Then, against `manifests/base`: every call is granted to the adapter's ServiceAccount (by the roles it binds,
Kubernetes' built-in ones as Kubernetes defines them), every grant of the project's own roles is used by some
call, and nothing grants writes cluster-wide.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from autoscaler.demo.fake_modelmesh import serve
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.settings import ServeSettings
from tests.fakes.kube import FakeKubeApi, RecordedRequest
from tests.fakes.kube.resources import parse_path
from tests.manifests.support import BASE, kustomize
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

SERVICE_ACCOUNT = "system:serviceaccount:modelmesh-autoscaler:modelmesh-autoscaler"
HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
NS = "modelmesh-serving"
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}
POD_IP = "127.0.0.6"
# Kubernetes' bootstrap roles the base binds (plugin/pkg/auth/authorizer/rbac/bootstrappolicy).
BUILT_IN: dict[str, list[dict[str, Any]]] = {
    "system:auth-delegator": [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ],
    "extension-apiserver-authentication-reader": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"],
         "resourceNames": ["extension-apiserver-authentication"]},
    ],
}


@dataclass(frozen=True)
class Call:
    group: str
    resource: str  # with the subresource: `runtimescales/status`
    verb: str
    namespace: str | None  # None: cluster-scoped or across all namespaces
    name: str | None


def call_of(method: str, path: str, query: dict[str, str]) -> Call | None:
    parsed = parse_path(path)
    if parsed is None:
        return None  # discovery, /version, health
    rtype, namespace, name, subresource = parsed
    if method == "GET":
        verb = "get" if name else ("watch" if query.get("watch", "").lower() not in ("", "0", "false") else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    resource = rtype.plural + (f"/{subresource}" if subresource else "")
    return Call(rtype.group, resource, verb, namespace, name)


@pytest.fixture(scope="module")
def calls(tmp_path_factory: pytest.TempPathFactory) -> set[Call]:
    """Every call the adapter made while all its parts did their work once."""
    return asyncio.run(_record_calls(tmp_path_factory.mktemp("rbac")))


async def _record_calls(workdir: Path, serve_args: Sequence[str] = ()) -> set[Call]:
    """The calls of one `serve` run with every part switched on; `serve_args` added to its command line."""
    requests = await record_requests(workdir, serve_args)
    return {call for r in requests if (call := call_of(r.method, r.path, r.query)) is not None}


async def record_requests(workdir: Path, serve_args: Sequence[str] = (),
                          require_token: str | None = None) -> list[RecordedRequest]:
    """Every request of one `serve` run with every part switched on, as the fake API server received them;
    `require_token`: the fake answers 401 to any request without that bearer token (or the HPA's)."""
    async with FakeKubeApi(require_token=require_token) as kube, _modelmesh_pod() as mm_port:
        kube.set_authentication_config(requestheader_client_ca=_a_ca_pem())
        kube.tokens["hpa-token"] = (HPA_USER, ["system:serviceaccounts"])
        kube.allow(user=HPA_USER, verb="list", group="external.metrics.k8s.io")
        kube.add_deployment(NS, DEPLOYMENT, replicas=1, labels=SELECTOR, selector=SELECTOR,
                            annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        kube.add_pod(NS, f"{DEPLOYMENT}-abc-1", labels={**SELECTOR, "pod-template-hash": "abc"}, ip=POD_IP)
        kube.add_serving_runtime(NS, "triton", replicas=1)
        kube.add_runtime_scale(NS, "triton", replicas=2)  # the HPA's choice: patched into the ServingRuntime
        kube.add_serving_runtime(NS, "fresh", replicas=1)
        kube.add_runtime_scale(NS, "fresh")  # no replicas yet: adopted from the runtime
        # ... conditionally on the version read: changed meanwhile (409), the RuntimeScale is read again
        kube.fail(r"/runtimescales/fresh$", status=409, method="PATCH")
        kube.add_cluster_serving_runtime("shared")
        kube.add_runtime_scale(NS, "shared")  # names a ClusterServingRuntime: read only to explain
        kubeconfig = kube.write_kubeconfig(workdir / "kubeconfig", namespace="modelmesh-autoscaler")
        policy = workdir / "policy.yaml"
        policy.write_text(yaml.safe_dump({"runtimes": [{"namespace": NS, "deployment": DEPLOYMENT}]}))
        exporter_port, adapter_port = free_port(), free_port()
        with contextlib.ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, running(
                ["exporter.cli", "--listen", f"{POD_IP}:{exporter_port}", "--no-gpu", "--modelmesh-url",
                 f"http://{POD_IP}:{mm_port}/metrics", "--modelmesh-interval", "0.5", "--load-window", "3"],
                f"http://{POD_IP}:{exporter_port}/healthz", workdir / "exporter.log"))
            await asyncio.to_thread(stack.enter_context, running(
                ["autoscaler.cli", "serve", "--listen", f"127.0.0.1:{adapter_port}", "--kubeconfig", str(kubeconfig),
                 "--config", str(policy), "--exporter-port", str(exporter_port), "--refresh-interval", "1",
                 "--window", "3", "--leader-elect", "true", "--leader-elect-lease-duration", "2",
                 "--leader-elect-renew-deadline", "1.5", "--leader-elect-retry-period", "0.2", *serve_args],
                f"https://127.0.0.1:{adapter_port}/healthz", workdir / "adapter.log"))
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            url = (f"https://127.0.0.1:{adapter_port}/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/"
                   f"modelmesh_desired_replicas?labelSelector=deployment%3D{DEPLOYMENT}")
            async with aiohttp.ClientSession() as session, asyncio.timeout(60):
                while not all(_done(kube)):
                    async with session.get(url, ssl=context, headers={"Authorization": "Bearer hpa-token"}):
                        pass
                    await asyncio.sleep(0.5)
                # The HPA scales: the bridge reads that RuntimeScale's runtime and Deployment on their own. On a
                # loaded machine the bridge's periodic full pass may carry a scale first (from its lists): scale
                # again until one is carried by the watch's own reads.
                for replicas in range(3, 9):
                    kube.update_object("runtimescales", NS, "triton", functools.partial(_scale_to, replicas))
                    while kube.serving_runtime_replicas(NS, "triton") != replicas:
                        await asyncio.sleep(0.1)
                    if any(r.method == "GET" and r.path.endswith("/servingruntimes/triton") for r in kube.requests):
                        break
        return list(kube.requests)


def _scale_to(replicas: int, scale: dict[str, Any]) -> None:
    scale["spec"]["replicas"] = replicas


def _done(kube: FakeKubeApi) -> list[bool]:
    pod = kube.objects("pods", NS)[0]
    fresh = kube.get("runtimescales", NS, "fresh") or {}
    return [
        DELETION_COST_ANNOTATION in (pod["metadata"].get("annotations") or {}),
        kube.serving_runtime_replicas(NS, "triton") == 2,
        "replicas" in fresh.get("spec", {}),
        all("status" in s for s in kube.objects("runtimescales", NS)),
        bool(kube.access_reviews) and bool(kube.token_reviews),
        any(r.method == "PUT" and "/leases/" in r.path for r in kube.requests),
    ]


@contextlib.asynccontextmanager
async def _modelmesh_pod() -> AsyncIterator[int]:
    port = free_port()
    runner = await serve(FakeModelMesh(ModelMeshLoad(requests_per_second=50)), POD_IP, port)
    try:
        yield port
    finally:
        await runner.cleanup()


def _a_ca_pem() -> str:
    import trustme

    return trustme.CA().cert_pem.bytes().decode()


def grants(directory: Path = BASE) -> list[tuple[str, str | None, dict[str, Any]]]:
    """(role name, namespace or None for cluster-wide, rule) for every rule bound to the adapter's account by
    what `directory` renders."""
    objects = kustomize(directory)
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objects if o["kind"] in ("Role", "ClusterRole")}
    bound: list[tuple[str, str | None, dict[str, Any]]] = []
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        subjects = {f"system:serviceaccount:{s['namespace']}:{s['name']}" for s in binding["subjects"]
                    if s["kind"] == "ServiceAccount"}
        if SERVICE_ACCOUNT not in subjects:
            continue
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        role = roles.get((ref["kind"], ref["name"]))
        rules = role["rules"] if role is not None else BUILT_IN[ref["name"]]
        bound.extend((ref["name"], namespace, rule) for rule in rules)
    return bound


def allows(rule: dict[str, Any], namespace: str | None, call: Call) -> bool:
    if namespace is not None and call.namespace != namespace:
        return False
    if rule.get("resourceNames") and call.name not in rule["resourceNames"]:
        return False
    return call.group in rule["apiGroups"] and call.resource in rule["resources"] and call.verb in rule["verbs"]


def test_the_adapter_exercised_every_kind_of_call(calls: set[Call]) -> None:
    kinds = {(c.group, c.resource, c.verb) for c in calls}
    assert {("", "pods", "patch"), ("serving.kserve.io", "servingruntimes", "patch"),
            ("autoscaler.modelmesh.io", "runtimescales/status", "patch"),
            ("coordination.k8s.io", "leases", "update"),
            ("authorization.k8s.io", "subjectaccessreviews", "create")} <= kinds


def test_every_call_is_granted_to_the_adapters_service_account(calls: set[Call]) -> None:
    bound = grants()
    refused = [c for c in calls if not any(allows(rule, namespace, c) for _, namespace, rule in bound)]

    assert refused == []


def test_every_grant_of_the_projects_roles_is_used(calls: set[Call]) -> None:
    unused = [
        (role, namespace, group, resource, verb)
        for role, namespace, rule in grants() if role not in BUILT_IN
        for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]
        if not any(allows({**rule, "apiGroups": [group], "resources": [resource], "verbs": [verb]}, namespace, c)
                   for c in calls)
    ]

    assert unused == []


def test_nothing_writes_cluster_wide() -> None:
    writes = {"create", "update", "patch", "delete", "deletecollection", "*"}
    cluster_wide = [(role, rule) for role, namespace, rule in grants()
                    if namespace is None and writes & set(rule["verbs"])
                    and not set(rule["resources"]) <= {"tokenreviews", "subjectaccessreviews"}]

    assert cluster_wide == []


def test_the_adapter_may_read_and_renew_only_its_own_lease() -> None:
    """Any Lease in its namespace was open to it: another controller's too (a leader election it could take)."""
    lease_rules = [rule for _, _, rule in grants() if "leases" in rule["resources"]]
    for rule in lease_rules:
        if {"get", "update"} & set(rule["verbs"]):
            assert rule.get("resourceNames") == [ServeSettings().leader_elect_lease_name], rule
