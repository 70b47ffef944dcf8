"""The promise of `autoscaler.kube.token_file`: the token sent is the file's latest well-read token, however the
kubelet's rotations, an emptied file or a removed one come. Rotations as the kubelet makes them: a new file
renamed over the old one (its atomic writer swaps a symlink), so each is a new inode."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.kube.token_file import TokenFile

TOKENS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._", max_size=12)
EVENTS = st.lists(st.one_of(TOKENS.map(lambda token: ("write", token)),
                            st.just(("write", "  \n")), st.just(("remove", ""))), max_size=12)


def replace(path: Path, text: str) -> None:
    """Write `text` to a new file and rename it over `path`, as the kubelet rotates a projected token."""
    fd, temporary = tempfile.mkstemp(dir=path.parent)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    os.replace(temporary, path)


@settings(max_examples=60, deadline=None)
@given(events=EVENTS)
def test_the_token_is_the_latest_one_read_well(events: list[tuple[str, str]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "token"
        tokens = TokenFile(path)
        expected: str | None = None
        for action, text in events:
            if action == "remove":
                path.unlink(missing_ok=True)
            else:
                replace(path, text)
                expected = text.strip() or expected
            assert tokens.token() == expected
