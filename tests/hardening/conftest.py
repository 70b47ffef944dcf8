"""The leader-election tests here use the actuation tests' fake API server, client and stepped clock."""

from tests.actuation.conftest import clock, kube, kube_client, kubeconfig

__all__ = ["clock", "kube", "kube_client", "kubeconfig"]
