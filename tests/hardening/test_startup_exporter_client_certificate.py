"""The adapter's client certificate for the exporters (`--exporter-client-cert-file`/`--exporter-client-key-file`)
is checked before it serves: one file without the other, or a pair that does not load, is one line naming the
flag and the file, where found at the first scrape it stopped the refresh after "serving" was logged."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme

from tests.hardening.adapter import write_targets
from tests.hardening.test_startup_errors import one_line, serve
from tests.support.certificates import issue_cert


def targets(tmp_path: Path) -> str:
    """An exporter scraped over https, where a client certificate applies: with http:// URLs only, the flags
    are also warned of as doing nothing (`autoscaler.unused_settings`), a second line beside the refusal."""
    return str(write_targets(tmp_path / "targets.yaml", ["https://127.0.0.1:1/metrics"]))


def client_pair(tmp_path: Path) -> tuple[Path, Path]:
    leaf = issue_cert(trustme.CA(), "modelmesh-autoscaler")
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    return cert, key


@pytest.mark.parametrize("given", ["--exporter-client-cert-file", "--exporter-client-key-file"])
def test_one_file_of_the_pair_alone_is_refused(tmp_path: Path, given: str) -> None:
    cert, _ = client_pair(tmp_path)
    line = one_line(serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path), given, str(cert)]))
    assert ("cannot start: --exporter-client-cert-file and --exporter-client-key-file go together" in line), line


def test_a_key_of_another_certificate_is_refused_naming_both_files(tmp_path: Path) -> None:
    cert, _ = client_pair(tmp_path)
    other = tmp_path / "other.key"
    issue_cert(trustme.CA(), "x").private_key_pem.write_to_path(str(other))
    line = one_line(serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path),
                                     "--exporter-client-cert-file", str(cert), "--exporter-client-key-file",
                                     str(other)]))
    assert (f"--exporter-client-cert-file {cert} and --exporter-client-key-file {other} are not a PEM certificate "
            "and its private key") in line, line


def test_a_missing_key_is_named(tmp_path: Path) -> None:
    cert, _ = client_pair(tmp_path)
    missing = tmp_path / "nowhere.key"
    line = one_line(serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path),
                                     "--exporter-client-cert-file", str(cert), "--exporter-client-key-file",
                                     str(missing)]))
    assert f"--exporter-client-key-file {missing}: cannot read it: No such file or directory" in line, line
