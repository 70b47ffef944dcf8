"""The exporter's file flags reach their settings field, by flag and by variable, as every other flag does
(`test_exporter_app.test_each_flag_and_its_variable_set_the_same_field`, which leaves these out: each needs real
files, or a companion flag, to pass the start's checks). With these, every `modelmesh-exporter` flag is shown to
land in its field: the flag table is where that is said (`EnvFlag.setting`), and a flag it placed wrongly, or not
at all, would keep serving the default.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.api.certs import CertificateFiles, generate_self_signed
from exporter.settings import ExporterSettings, parse_settings

SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> CertificateFiles:
    return generate_self_signed(tmp_path_factory.mktemp("exporter-tls"), "exporter", ["127.0.0.1"])


def env_name(flag: str) -> str:
    return "EXPORTER_" + flag.removeprefix("--").replace("-", "_").upper()


def cases(pair: CertificateFiles) -> list[tuple[list[str], str, Path, str]]:
    """(companion flags, flag, value, field): the companions are what the start asks to come with the flag."""
    cert, key = pair.cert_file, pair.key_file
    return [
        ([], "--modelmesh-ca-file", cert, "modelmesh_ca_file"),
        (["--pod-name", "triton-0", "--pod-namespace", "ml"], "--gpu-pod-resources-socket", Path(SOCKET),
         "pod_resources_socket"),
        (["--tls-key-file", str(key)], "--tls-cert-file", cert, "tls_cert_file"),
        (["--tls-cert-file", str(cert)], "--tls-key-file", key, "tls_key_file"),
        (["--tls-cert-file", str(cert), "--tls-key-file", str(key)], "--tls-client-ca-file", cert,
         "tls_client_ca_file"),
    ]


@pytest.mark.parametrize("index", range(5), ids=["modelmesh-ca-file", "gpu-pod-resources-socket", "tls-cert-file",
                                                 "tls-key-file", "tls-client-ca-file"])
def test_each_file_flag_and_its_variable_set_their_field(pair: CertificateFiles, index: int) -> None:
    companions, flag, value, field = cases(pair)[index]
    from_flag = parse_settings([*companions, flag, str(value)], environ={})
    from_env = parse_settings(companions, environ={env_name(flag): str(value)})
    assert getattr(from_flag, field) == value
    assert getattr(from_env, field) == value
    assert getattr(ExporterSettings(), field) != value  # the case changes a default
