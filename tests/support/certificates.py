"""Every certificate the tests and benchmarks issue with trustme, issued here so that each has an identity.

trustme writes the identities it is given (host names, addresses, e-mail addresses) as the certificate's
subjectAltName. A client certificate is named by its subject instead (the adapter's x509 and requestheader
authenticators read CN as the user and O as the groups, as kube-apiserver's do), so the tests issued those with a
common name and no identity; trustme 1.2.1 then writes an *empty* subjectAltName, which cryptography 51 refuses
("general_names must be a non-empty list"), and every TLS test erred. `issue_cert` gives such a certificate the one
identity `NO_HOST`, under the reserved `.invalid` top-level domain (RFC 6761: it never resolves), so the
certificate still names no host that anything serves or dials, and its subject is what it was.
"""

from __future__ import annotations

from datetime import datetime

import trustme

NO_HOST = "client.invalid"
"""The identity of a certificate issued with none: no host anything serves or dials is called this."""


def issue_cert(authority: trustme.CA, *identities: str, common_name: str | None = None,
          organization_name: str | None = None, not_before: datetime | None = None,
          not_after: datetime | None = None, key_type: trustme.KeyType = trustme.KeyType.ECDSA) -> trustme.LeafCert:
    """`authority.issue_cert(...)` with the same arguments, where a certificate given no identities (a client
    certificate named by `common_name`) gets `NO_HOST` rather than the empty subjectAltName cryptography 51 refuses."""
    return authority.issue_cert(*(identities or (NO_HOST,)), common_name=common_name,
                                organization_name=organization_name, not_before=not_before, not_after=not_after,
                                key_type=key_type)
