"""Lease decoding and validation, as kube-apiserver does it for `coordination.k8s.io/v1` Leases.

- `acquireTime` and `renewTime` are MicroTime: Go parses them with the layout `2006-01-02T15:04:05.000000Z07:00`
  (apimachinery `meta/v1/micro_time.go`), which takes exactly six fractional digits and `Z` or an offset; any
  other spelling fails decoding, a 400 before validation. Python's `isoformat()` drops the fraction when the
  microseconds are 0, which this catches.
- `leaseDurationSeconds` and `leaseTransitions` are int32: a fraction or a string fails decoding (400); then
  `ValidateLeaseSpec` (pkg/apis/coordination/validation) wants a duration above 0 and transitions of at least 0
  (422).
"""

from __future__ import annotations

import re
from typing import Any, Final

from tests.fakes.kube.wire import JSON, ApiError

_MICRO_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})")
_LAYOUT: Final = "2006-01-02T15:04:05.000000Z07:00"
_INT32: Final = (-(2**31), 2**31 - 1)


def check_lease(lease: JSON) -> None:
    """Refuse a Lease the server would not decode (400) or validate (422)."""
    spec = lease.get("spec") or {}
    for key in ("acquireTime", "renewTime"):
        value = spec.get(key)
        if value is not None and not (isinstance(value, str) and _MICRO_TIME.fullmatch(value)):
            raise _undecodable(f'parsing time "{value}" as "{_LAYOUT}": cannot parse "{value}" as "{_LAYOUT}"')
    for key in ("leaseDurationSeconds", "leaseTransitions"):
        value = spec.get(key)
        if value is not None and not _is_int32(value):
            raise _undecodable(f"json: cannot unmarshal {_json_type(value)} into Go struct field "
                               f"LeaseSpec.spec.{key} of type int32")
    name = (lease.get("metadata") or {}).get("name", "")
    causes = []
    if spec.get("leaseDurationSeconds") is not None and spec["leaseDurationSeconds"] <= 0:
        causes.append(("spec.leaseDurationSeconds", spec["leaseDurationSeconds"], "must be greater than 0"))
    if spec.get("leaseTransitions") is not None and spec["leaseTransitions"] < 0:
        causes.append(("spec.leaseTransitions", spec["leaseTransitions"], "must be greater than or equal to 0"))
    if causes:
        raise ApiError.invalid("Lease", "coordination.k8s.io", name, causes)


def _undecodable(detail: str) -> ApiError:
    return ApiError.bad_request(f'Lease in version "v1" cannot be handled as a Lease: {detail}')


def _is_int32(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and _INT32[0] <= value <= _INT32[1]


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {value}"
    return "string" if isinstance(value, str) else type(value).__name__
