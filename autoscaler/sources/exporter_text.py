"""A fast, strict reader of the exporter's own `/metrics` text, with `prometheus_client`'s parser behind it.

The adapter scrapes every exporter every refresh; `prometheus_client`'s text parser costs about 300 µs per
exporter response (580 µs with 8 GPUs), most of a 2,000-pod refresh. Both ends of this format are ours
(`exporter/names.py`, rendered by `prometheus_client`), so a narrow reader is enough: regular expressions
accepting exactly the shapes the exporter writes (`# HELP`, `# TYPE`, `name{label="value",...}
value [timestamp]`, label values without escapes, plain numbers, `NaN`, `+Inf`, `-Inf`). Anything else (an
escape, odd spacing, another float spelling, a comment of another kind) makes it give up, and the caller
parses the whole text with the library instead, so the fast path can only ever agree with the library
(`tests/sources/test_exporter_text.py` checks that on fuzzed input with hypothesis).

It returns only the samples the adapter reads (`WANTED`), in order, as `(name, labels, value)`; labels are
decoded only for the freshness timestamp, the one series whose label the adapter looks at. The text is checked
in one regular-expression pass and the wanted samples found in another, both in C: reading it line by line in
Python cost about twice as much (`bench/bench_exporter_text.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from exporter import names

Sample = tuple[str, dict[str, str], float]

WANTED = frozenset({
    names.GPU_BUSY_RATIO, names.REQUESTS_PER_SECOND, names.QUEUE_DELAY_SECONDS, names.CACHE_MISSES_PER_SECOND,
    names.LRU_AGE_SECONDS, names.CACHE_USED_RATIO, names.MODELS_LOADED, names.LAST_SUCCESS_TIMESTAMP,
    names.COLLECTOR_SUCCESS, names.EXPORTER_TIME,
})
_LABELLED = names.LAST_SUCCESS_TIMESTAMP

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_LABEL = rf'{_LABEL_NAME}="[^"\\\n]*"'
_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?Inf|NaN"
_SAMPLE = rf"{_NAME}(?:\{{(?:{_LABEL}(?:,{_LABEL})*)?\}})? (?:{_NUMBER})(?: -?[0-9]+)?"
_COMMENT = rf"# HELP {_NAME} [^\\\n]*|# HELP {_NAME}|# TYPE {_NAME} (?:counter|gauge|histogram|summary|untyped)"
_LINE = rf"(?:{_COMMENT}|{_SAMPLE})?"
_DOCUMENT = re.compile(rf"{_LINE}(?:\n{_LINE})*")
"""Every line empty, a comment or a sample of the shapes above: checked in one pass over the text."""
_REPEATED_LABEL = re.compile(rf'\n{_NAME}\{{(?:{_LABEL},)*({_LABEL_NAME})="[^"\n]*",(?:{_LABEL},)*\1="')
"""A sample line naming a label twice, which the library refuses."""
_WANTED_SAMPLE = re.compile(
    rf"\n({'|'.join(re.escape(name) for name in sorted(WANTED, key=len, reverse=True))})"
    rf"(?:\{{([^\n]*)\}})? ({_NUMBER})")
"""A wanted sample at the start of a line (of a text already checked: its label text ends at the line's last
brace), found with the leading newline as a literal prefix, so that the search skips the other lines fast."""
_PAIR = re.compile(rf'({_LABEL_NAME})="([^"]*)"')


def fast_samples(text: str) -> list[Sample] | None:
    """The wanted samples, or None when the text holds anything this reader does not know for certain."""
    if _DOCUMENT.fullmatch(text) is None:
        return None
    lines = "\n" + text
    if _REPEATED_LABEL.search(lines) is not None:
        return None
    return [(name, dict(_PAIR.findall(label_text)) if name == _LABELLED and label_text else {}, float(value))
            for name, label_text, value in _WANTED_SAMPLE.findall(lines)]


def wanted(samples: Iterable[Sample]) -> list[Sample]:
    """Only the samples the adapter reads, as `fast_samples` returns them (for comparing with the library)."""
    return [sample for sample in samples if sample[0] in WANTED]
