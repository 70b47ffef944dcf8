"""What the adapter says when a Prometheus request fails on the adapter's side, before anything is asked, through
the real CLI flags.

requests raises a plain OSError, not one of its own exceptions, when the CA bundle of `--prometheus-ca-file` is
not there at the time of a request (a Secret or a CSI volume being swapped, a path mistyped in an edit of the
Deployment after the check at start). The reader took only requests' exceptions for failures: the clock query's
OSError left `collect()` raw, every refresh logged "refresh failed" with a traceback, nothing was counted, and
/debug said nothing; had it come from a signal's query it was counted as `parse`, which sent the operator after
Prometheus's answers.
"""

from __future__ import annotations

import logging
import ssl
import time
from pathlib import Path

import pytest
import trustme

from autoscaler import cli
from autoscaler.serve_args import settings_from_args
from autoscaler.server import build_source
from autoscaler.sources.prometheus import PrometheusSource
from tests.sources.test_prometheus_probe_backends import empty_prometheus_over_tls, warnings
from tests.sources.test_prometheus_source import discovery
from tests.support.certificates import issue_cert


async def test_a_ca_file_gone_after_start_is_counted_as_tls_and_names_the_flag_and_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "service-ca.crt"
    ca.cert_pem.write_to_path(str(ca_file))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    issue_cert(ca, "localhost").configure_cert(context)
    async with empty_prometheus_over_tls(context) as port:
        args = cli.build_parser().parse_args([
            "serve", "--source", "prometheus", "--prometheus-url", f"https://localhost:{port}",
            "--prometheus-ca-file", str(ca_file)])
        source = build_source(settings_from_args(args, {}), discovery())  # checks the file: it is there
        assert isinstance(source, PrometheusSource)
        ca_file.unlink()
        try:
            with caplog.at_level(logging.WARNING):
                snapshots = await source.collect(time.time())
            problems = source.problems(snapshots[0].key)
        finally:
            await source.close()

    assert all(not s.source_ok for s in snapshots)
    assert source.errors == {"tls": 1}
    (line,) = warnings(caplog)
    assert "--prometheus-ca-file" in line and str(ca_file) in line, line
    assert "Traceback" not in caplog.text
    assert [problem.reason for problem in problems] == ["tls"]
    assert str(ca_file) in problems[0].detail
