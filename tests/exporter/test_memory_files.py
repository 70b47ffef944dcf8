"""`files_holding` gives OpenSSL the very bytes it was given, under paths that need no writable filesystem, and
leaves nothing behind: the private key of a renewed certificate must not outlive its load."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.memory_files import files_holding


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=200_000), min_size=1, max_size=3))
def test_each_path_reads_back_its_bytes_and_is_gone_after(contents: list[bytes]) -> None:
    with files_holding(*contents) as paths:
        assert [path.read_bytes() for path in paths] == contents
        assert all(not str(path).startswith(("/tmp", "/var/tmp")) for path in paths)  # memory, not a filesystem
        held = list(paths)
    for path in held:
        assert not Path(path).exists()
