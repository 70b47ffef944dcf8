"""Every name a person writes is refused by the same rule, in the same words, wherever it is written: a
namespace in `--namespaces`, `--pod-namespace` or a targets file's runtime; an object's name in `--lease-name`,
`--pod-name` or a runtime's Deployment. A name one place accepts and another refuses would be a runtime that
is checked at start and then matches nothing."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from autoscaler import serve_flag_values
from autoscaler.kube_names import runtime_key_problem
from exporter import env_flags, sidecar_flag_values

NAMES = st.one_of(
    st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,70}[a-z0-9])?", fullmatch=True),
    st.text(alphabet="abcXYZ019-._ $()", min_size=1, max_size=80).map(str.strip).filter(bool),
    st.from_regex(r"[a-z]{250,260}", fullmatch=True),
)


def refusal(convert: Callable[[str], object], value: str) -> str | None:
    try:
        convert(value)
    except argparse.ArgumentTypeError as error:
        return str(error)
    return None


@given(NAMES)
def test_a_namespace_is_refused_alike_by_every_check(name: str) -> None:
    flag = refusal(env_flags.namespace, name)
    flags = refusal(serve_flag_values.namespaces, name)
    written = runtime_key_problem(name, "deployment")
    assert (flag is None) == (flags is None) == (written is None)
    if written is not None:
        rule = "lower-case letters, digits and '-', at most 63"
        assert rule in written and rule in str(flag) and rule in str(flags)


@given(NAMES)
def test_an_object_name_is_refused_alike_by_every_check(name: str) -> None:
    lease = refusal(serve_flag_values.object_name, name)
    pod = refusal(sidecar_flag_values.pod_name, name)
    written = runtime_key_problem("namespace", name)
    assert (lease is None) == (pod is None) == (written is None)
    if written is not None:
        rule = "lower-case letters, digits, '-' and '.', at most 253"
        assert rule in written and rule in str(lease) and rule in str(pod)
