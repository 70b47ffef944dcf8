"""A client cannot write lines of its own into the adapter's log. The path a request names is the client's to
choose, and a percent-encoded line break (`%0A`) decodes into it; written as it is, it ends the adapter's
line and starts one that reads like the adapter's own (a forged `WARNING` or a fake authorization decision,
for whoever reads the log or ships it to a SIEM). The gate logs paths quoted, as kube's klog does."""

from __future__ import annotations

import logging

import pytest

from tests.api.conftest import SecuredApi

HPA = {"X-Remote-User": "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}
FORGED = "/apis/x%0D%0A2026-01-01 00:00:00,000 WARNING autoscaler.api.auth: all clear"


async def test_a_line_break_in_an_unauthenticated_path_stays_in_its_line(
        secured: SecuredApi, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="autoscaler.api.auth"):
        assert (await secured.get(FORGED))[0] == 401
    lines = [record.getMessage() for record in caplog.records if record.name == "autoscaler.api.auth"]
    assert lines and all("\n" not in line and "\r" not in line for line in lines), lines


async def test_a_line_break_in_a_path_that_cannot_be_authorized_stays_in_its_line(
        secured: SecuredApi, caplog: pytest.LogCaptureFixture) -> None:
    secured.kube.fail("subjectaccessreviews", 500, times=None)
    with caplog.at_level(logging.WARNING, logger="autoscaler.api.auth"):
        assert (await secured.get(FORGED, cert=secured.pki.proxy, headers=HPA))[0] == 500
    lines = [record.getMessage() for record in caplog.records if record.name == "autoscaler.api.auth"]
    assert lines and all("\n" not in line and "\r" not in line for line in lines), lines
