"""The demo's output as one line per thing it says, for tests that read it: its lines are wrapped to 80 columns
where piped (`autoscaler.demo.say`), and a reader joins them back as a person reads them.

Written from what the output shows, not from the code that wraps it: a line that starts with four or more blanks
continues the line above (a hanging indent; the demo's own lines start with none or two), joined with one blank;
a line that ends with a backslash continues on the next as the shell reads it (the `try: curl` command)."""

from __future__ import annotations

import re

CONTINUED = re.compile(r"\n {4,}")
SHELL_CONTINUED = "\\\n"


def unwrap(text: str) -> str:
    """`text` with each wrapped line joined back into one."""
    return CONTINUED.sub(" ", text.replace(SHELL_CONTINUED, ""))
