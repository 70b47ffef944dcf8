"""A kubeconfig exec plugin that hands out a client certificate instead of a token (Teleport's `tsh`,
Pinniped, in-house CAs; `status.clientCertificateData` / `clientKeyData`, client.authentication.k8s.io/v1).
kubectl runs the plugin again when the certificate expires, or when the server answers 401. `kubernetes.aio`
reads the certificate once into its TLS context: from the certificate's expiry every call answered
401 Unauthorized until someone restarted the adapter."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest
import trustme
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.kube.client import KubeApiError, KubeClient
from autoscaler.kube.renewal_pace import RENEW_BEFORE_S, renewal_time
from tests.kube import client_cert_fixtures
from tests.kube.client_cert_api import CertificatePlugin, ClientCertKubeApi, serial_of
from tests.kube.client_cert_fixtures import HOUR, connect_with_first, hand_out_another, read_with
from tests.kube.exec_token_fixtures import connect
from tests.support.certificates import issue_cert
from tests.support.clock import SteppedClock
from tests.support.waiting import eventually

clock, kube = client_cert_fixtures.clock, client_cert_fixtures.kube  # the shared fixtures (pytest finds them here)


async def test_a_plugin_certificate_is_fetched_again_when_it_expires(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path
) -> None:
    plugin = CertificatePlugin(tmp_path)
    client, _ = await connect_with_first(kube, clock, plugin)
    try:
        assert await client.get_lease("ml", "modelmesh-autoscaler") is None  # 404: authenticated, nothing there
        second = hand_out_another(kube, clock, plugin)

        clock.now += HOUR + 1  # the first certificate has expired

        await read_with(client, kube, second)
    finally:
        await client.close()


async def test_a_plugin_certificate_is_replaced_before_it_expires_and_old_connections_are_not_reused(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path
) -> None:
    """Renewed a few minutes ahead, so no call meets the expiry; connections the old certificate opened are
    closed, or a busy one would carry it past its expiry (the server judges each request by its connection)."""
    plugin = CertificatePlugin(tmp_path)
    client, _ = await connect_with_first(kube, clock, plugin)
    try:
        for _ in range(3):
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        second = hand_out_another(kube, clock, plugin)
        runs = plugin.runs

        clock.now += HOUR - 60  # a minute before the expiry: the plugin runs, the calls meanwhile use the first
        await call_until_served_with(client, kube, second)
        for _ in range(3):
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None

        assert kube.serials[-3:] == [serial_of(second)] * 3
        assert plugin.runs - runs == 1
    finally:
        await client.close()


async def test_a_slow_plugin_delays_no_call_while_the_certificate_is_still_valid(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path
) -> None:
    """The leader's Lease renewal went out behind the plugin run it set off, a minute before the certificate
    expired: a plugin that asks a remote CA (or a loaded node) took longer than the renewal's deadline, the
    renewal was abandoned with the run, and the leader stopped writing ("not renewed within"). The calls go on
    with the certificate that still works while the plugin runs; the ones after it use the new one."""
    plugin = CertificatePlugin(tmp_path)
    client, first = await connect_with_first(kube, clock, plugin)
    try:
        assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        second = hand_out_another(kube, clock, plugin)
        runs = plugin.runs
        plugin.hold()
        clock.now += HOUR - 60  # renewal due, a minute left

        try:
            async with asyncio.timeout(30):  # a hang guard: held, the plugin never answers
                for _ in range(3):
                    assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        except TimeoutError:
            pytest.fail("the calls waited for the plugin while the certificate they had was valid for a minute")
        assert kube.serials[-3:] == [serial_of(first)] * 3
        await eventually(lambda: plugin.runs - runs == 1)  # the plugin had been asked, and is still held

        plugin.release()
        await call_until_served_with(client, kube, second)
        for _ in range(3):
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        assert kube.serials[-3:] == [serial_of(second)] * 3
        assert plugin.runs - runs == 1
    finally:
        plugin.release()
        await client.close()


async def test_a_call_given_up_while_the_plugin_runs_leaves_the_renewal_to_finish(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path
) -> None:
    """After the expiry a call waits for the new certificate; the caller giving up (the Lease renewal's deadline)
    ended the plugin run with it, and the next call started another from scratch, as slow: under load none
    ever finished. The run goes on, and the next call has its certificate."""
    plugin = CertificatePlugin(tmp_path)
    client, _ = await connect_with_first(kube, clock, plugin)
    try:
        assert await client.get_lease("ml", "modelmesh-autoscaler") is None
        second = hand_out_another(kube, clock, plugin)
        runs = plugin.runs
        plugin.hold()
        clock.now += HOUR + 1  # expired

        given_up = asyncio.create_task(client.get_lease("ml", "modelmesh-autoscaler"))
        await eventually(lambda: plugin.runs > runs)
        given_up.cancel()
        with pytest.raises(asyncio.CancelledError):
            await given_up
        plugin.release()

        await read_with(client, kube, second)
        assert plugin.runs - runs == 1
    finally:
        plugin.release()
        await client.close()


def said_by_credentials(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "autoscaler.kube"]


async def call_until_served_with(client: KubeClient, kube: ClientCertKubeApi, cert: trustme.LeafCert) -> None:
    """Call until a call goes out with `cert`: a renewal in the background lands between two calls. A generous
    hang guard, not a timing: it ends as soon as the plugin has answered."""
    async with asyncio.timeout(30):
        while kube.serials[-1] != serial_of(cert):
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
            await asyncio.sleep(0.01)


async def test_a_plugin_that_fails_leaves_the_last_certificate_and_warns_once(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = CertificatePlugin(tmp_path)
    client, first = await connect_with_first(kube, clock, plugin)
    try:
        plugin.credential.unlink()  # the plugin now fails ("not logged in")
        clock.now += HOUR - 60
        runs = plugin.runs
        with caplog.at_level(logging.INFO, "autoscaler.kube"):
            for _ in range(3):
                assert await client.get_lease("ml", "modelmesh-autoscaler") is None
            await eventually(lambda: said_by_credentials(caplog) != [])  # the run has failed
            for _ in range(3):
                assert await client.get_lease("ml", "modelmesh-autoscaler") is None
    finally:
        await client.close()
    assert kube.serials[-3:] == [serial_of(first)] * 3
    assert plugin.runs - runs == 1, "not a plugin run per call"
    [warning] = said_by_credentials(caplog)
    assert warning.levelname == "WARNING"
    assert warning.getMessage().startswith(
        "Kubernetes credentials: cannot refresh the client certificate of the kubeconfig's exec plugin, "
        "using the last certificate: ")
    assert "not logged in" in warning.getMessage()


async def connect_and_revoke(kube: ClientCertKubeApi, clock: SteppedClock,
                             plugin: CertificatePlugin) -> tuple[KubeClient, trustme.LeafCert]:
    """A client whose first certificate served a call and was then revoked, and the second the plugin hands out."""
    client, first = await connect_with_first(kube, clock, plugin)
    assert await client.get_lease("ml", "modelmesh-autoscaler") is None
    kube.revoked.add(serial_of(first))
    second = kube.issue("adapter", clock.now + HOUR)
    plugin.hand_out(second, clock.now + HOUR)
    return client, second


async def refused_read(client: KubeClient) -> None:
    """The call that meets the revoked certificate's 401 fails (the caller retries)."""
    with pytest.raises(KubeApiError) as refused:
        await client.get_lease("ml", "modelmesh-autoscaler")
    assert refused.value.status == 401


async def test_a_certificate_the_server_refuses_is_fetched_again_after_the_401(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path
) -> None:
    """Revoked, or its CA rotated, well before the expiry the plugin gave: the call that met the 401 fails (the
    caller retries), the next one goes out with a new certificate."""
    plugin = CertificatePlugin(tmp_path)
    client, second = await connect_and_revoke(kube, clock, plugin)
    try:
        await refused_read(client)
        await read_with(client, kube, second)
    finally:
        await client.close()


async def test_calls_during_the_run_a_401_started_wait_for_the_new_certificate(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path
) -> None:
    """A call made while the plugin runs after a 401 went out with the refused certificate and met a 401 of its
    own: the run was not due again (at most every EXEC_RETRY_S), though the certificate was known refused. It waits
    for that run, as the call that started it does."""
    plugin = CertificatePlugin(tmp_path)
    client, _ = await connect_and_revoke(kube, clock, plugin)
    try:
        await refused_read(client)
        runs = plugin.runs
        plugin.hold()  # the run takes a while (a remote CA)
        starter = asyncio.create_task(client.get_lease("ml", "modelmesh-autoscaler"))
        await eventually(lambda: plugin.runs > runs)
        joiner = asyncio.create_task(client.get_lease("ml", "modelmesh-autoscaler"))
        await asyncio.sleep(0.2)  # the second call on its way
        plugin.release()
        assert list(await asyncio.gather(starter, joiner, return_exceptions=True)) == [None, None]
        assert plugin.runs == runs + 1
    finally:
        plugin.release()
        await client.close()


async def test_a_certificate_refused_in_the_tls_handshake_is_fetched_again(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path
) -> None:
    """A server (or a proxy in front of it) that checks the certificate in the handshake refuses one signed by
    a CA it does not trust (its CA rotated): no HTTP answer at all, a TLS failure; the next call must go out
    with a new certificate, as after a 401."""
    plugin = CertificatePlugin(tmp_path)
    foreign = issue_cert(trustme.CA(), common_name="adapter")
    plugin.hand_out(foreign, clock.now + HOUR)
    client = await connect(kube, plugin)
    try:
        with pytest.raises(KubeApiError) as refused:
            await client.get_lease("ml", "modelmesh-autoscaler")
        assert refused.value.status is None
        good = kube.issue("adapter", clock.now + HOUR)
        plugin.hand_out(good, clock.now + HOUR)

        await read_with(client, kube, good)
    finally:
        await client.close()


@pytest.mark.parametrize("answer", ["a key that is not the certificate's", "a certificate already expired"])
async def test_a_plugin_answer_that_cannot_be_used_leaves_the_last_certificate(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: str
) -> None:
    """Loading a certificate with the wrong key into the live TLS context would leave it with neither pair:
    the answer is checked first, and the calls go on with the certificate that still works."""
    plugin = CertificatePlugin(tmp_path)
    client, first = await connect_with_first(kube, clock, plugin)
    try:
        clock.now += HOUR - 60
        if answer == "a key that is not the certificate's":
            mismatched = kube.issue("adapter", clock.now + HOUR)
            mismatched.private_key_pem = kube.issue("other", clock.now + HOUR).private_key_pem
            plugin.hand_out(mismatched, clock.now + HOUR)
        else:
            plugin.hand_out(kube.issue("adapter", clock.now - 1), clock.now - 1)
        with caplog.at_level(logging.WARNING, "autoscaler.kube"):
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
            await eventually(lambda: said_by_credentials(caplog) != [])  # the plugin's answer was refused
            assert await client.get_lease("ml", "modelmesh-autoscaler") is None
    finally:
        await client.close()
    assert kube.serials[-1] == serial_of(first)
    [warning] = [r.getMessage() for r in said_by_credentials(caplog)]
    assert "using the last certificate: ValueError: the plugin's certificate" in warning


@given(st.floats(1e9, 3e9), st.floats(0.001, 30 * 24 * HOUR))
def test_a_certificate_is_renewed_within_its_life_never_more_than_five_minutes_early(
    now: float, lifetime: float
) -> None:
    renew_at = renewal_time(now, now + lifetime)
    assert now <= renew_at < now + lifetime
    assert now + lifetime - renew_at <= RENEW_BEFORE_S + 1e-6
    assert renew_at - now >= 0.8 * lifetime - 1e-6  # a short certificate is used for most of its life


async def test_a_renewal_after_the_temporary_folder_was_cleaned_away_still_lands(
    kube: ClientCertKubeApi, clock: SteppedClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renewed pair lives in a private folder under the temporary directory, which a node's tmp cleaner
    (systemd-tmpfiles, after days) may remove while the adapter runs: the next renewal makes another folder
    rather than failing for good (it once raised in its task, and every call after expiry went on refused)."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temporary))
    plugin = CertificatePlugin(tmp_path)
    plugin.hand_out(kube.issue("adapter", clock.now + HOUR), clock.now + HOUR)
    client = await connect(kube, plugin)
    try:
        second = hand_out_another(kube, clock, plugin)
        clock.now += HOUR + 1
        await read_with(client, kube, second)
        [folder] = temporary.glob("modelmesh-autoscaler-kube-*")
        shutil.rmtree(folder)  # the tmp cleaner

        third = hand_out_another(kube, clock, plugin)
        clock.now += HOUR + 1  # the second has expired
        await read_with(client, kube, third)
    finally:
        await client.close()
