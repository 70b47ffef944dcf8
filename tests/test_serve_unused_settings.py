"""Settings of `serve` that do nothing beside others are named in a WARNING at start, not dropped in silence.

`--client-ca-file` with `--insecure-dev` (which authenticates nobody), `--leader-elect true` where nothing is
written to Kubernetes (a targets file without a kubeconfig), and `--refresh-nice` with `--workers 0` (no refresh
process of its own to lower) were taken without a word: a user who gave them believed they applied. A warning,
not a refusal, as for the other source's settings (tests/test_cli_source_flags.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.processes import running

TARGETS = """
runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods: [{name: demo-0, url: "http://127.0.0.1:9/metrics"}]
"""


def start_log(tmp_path: Path, *flags: str, env: dict[str, str] | None = None, targets: str = TARGETS,
              workers: str = "0") -> str:
    """What `serve --insecure-dev --workers WORKERS --targets FILE` (no Kubernetes API) logs by the time it
    answers; the file holds `targets`."""
    targets_file, log, port = tmp_path / "targets.yaml", tmp_path / "serve.log", free_port()
    targets_file.write_text(targets)
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", workers, "--listen", f"127.0.0.1:{port}",
            "--targets", str(targets_file), *flags]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AUTOSCALER_") and
               k != "KUBERNETES_SERVICE_HOST"}
    with running(args, f"https://127.0.0.1:{port}/healthz", log, env={**environ, **(env or {})}):
        pass
    return log.read_text()


def warnings(log: str) -> list[str]:
    return [line.split(" WARNING ", 1)[1] for line in log.splitlines() if " WARNING " in line]


@pytest.mark.parametrize(("flags", "env", "says"), [
    (["--client-ca-file", "/etc/ca/client.pem"], {},
     "--client-ca-file does nothing with --insecure-dev, which serves without authentication or authorization: "
     "leave it out, or drop --insecure-dev"),
    (["--requestheader-client-ca-file", "/ca/front.pem", "--requestheader-allowed-names", "front-proxy-client"],
     {"AUTOSCALER_CLIENT_CA_FILE": "/ca/client.pem"},
     "--requestheader-client-ca-file, --requestheader-allowed-names and AUTOSCALER_CLIENT_CA_FILE do nothing with "
     "--insecure-dev"),
    (["--leader-elect", "true"], {},
     "--leader-elect true does nothing: a leader is elected to write to Kubernetes, and nothing is written here "
     "(pod-deletion costs cannot be written: --targets without --kubeconfig outside a cluster names no Kubernetes "
     "API): leave it out"),
    (["--deletion-cost", "off", "--leader-elect-lease-duration", "30s"], {"AUTOSCALER_LEADER_ELECT": "true"},
     "AUTOSCALER_LEADER_ELECT true and --leader-elect-lease-duration do nothing: a leader is elected to write to "
     "Kubernetes, and nothing is written here (--deletion-cost=off and the replica bridge off: no Kubernetes "
     "writes)"),
    # Durations no Lease could use, where no Lease is elected: warned of, and the adapter starts (was: refused,
    # "cannot start: --leader-elect-lease-duration must be greater than --leader-elect-renew-deadline", status 2).
    (["--leader-elect", "true", "--leader-elect-lease-duration", "5", "--leader-elect-renew-deadline", "10"], {},
     "--leader-elect true, --leader-elect-lease-duration and --leader-elect-renew-deadline do nothing: a leader is "
     "elected to write to Kubernetes, and nothing is written here"),
    (["--leader-elect", "false", "--leader-elect-retry-period", "1", "--leader-elect-lease-name", "x"], {},
     "--leader-elect-retry-period and --leader-elect-lease-name do nothing with --leader-elect false: no Lease is "
     "elected; leave them out"),
    (["--refresh-nice", "5"], {},
     "--refresh-nice does nothing with --workers 0: the refresh shares the one process with serving, so there is "
     "no refresh process to lower; leave it out, or give --workers 1 or more"),
], ids=["client-ca", "request-header-ca-and-variable", "leader-elect-no-api", "leader-elect-variable-no-writes",
        "durations-no-lease-could-use-no-api", "lease-settings-election-off", "refresh-nice-one-process"])
def test_a_setting_that_does_nothing_beside_another_is_named_once_at_start(
        tmp_path: Path, flags: list[str], env: dict[str, str], says: str) -> None:
    log = start_log(tmp_path, *flags, env=env)
    said = [line for line in warnings(log) if says in line]
    assert len(said) == 1, log


def test_the_same_settings_where_they_apply_say_nothing_of_the_kind(tmp_path: Path) -> None:
    """--refresh-nice with a refresh process of its own; --leader-elect false alone; the defaults."""
    # The test processes' AUTOSCALER_REFRESH_NICE (tests/support/processes.TEST_PROCESS_ENV) set to the flag's
    # value: a variable of another value under the flag is warned of, rightly, as doing nothing.
    log = start_log(tmp_path, "--refresh-nice", "5", "--leader-elect", "false", workers="1",
                    env={"AUTOSCALER_REFRESH_NICE": "5"})
    assert not [line for line in warnings(log) if "does nothing" in line or "do nothing" in line], log


def test_every_setting_the_warnings_can_name_is_a_flag_of_serve() -> None:
    """The warnings name settings by their flags' dests: a renamed flag would never be named."""
    from autoscaler.serve_args import env_variables
    from autoscaler.unused_settings import AUTHENTICATION, LEASE

    assert {"AUTOSCALER_" + dest.upper() for dest in (*AUTHENTICATION, *LEASE)} <= set(env_variables())
