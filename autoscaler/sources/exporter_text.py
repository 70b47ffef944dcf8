"""A fast, strict reader of the exporter's own `/metrics` text, with `prometheus_client`'s parser behind it.

The adapter scrapes every exporter every refresh; `prometheus_client`'s text parser costs about 300 µs per
exporter response (580 µs with 8 GPUs), most of a 2,000-pod refresh. Both ends of this format are ours
(`exporter/names.py`, rendered by `prometheus_client`), so a narrow reader is enough: one regular expression
per line, accepting exactly the shapes the exporter writes (`# HELP`, `# TYPE`, `name{label="value",...}
value [timestamp]`, label values without escapes, plain numbers, `NaN`, `+Inf`, `-Inf`). Anything else (an
escape, odd spacing, another float spelling, a comment of another kind) makes it give up, and the caller
parses the whole text with the library instead, so the fast path can only ever agree with the library
(`tests/sources/test_exporter_text.py` checks that on fuzzed input with hypothesis).

It returns only the samples the adapter reads (`WANTED`), in order, as `(name, labels, value)`; labels are
decoded only for the freshness timestamp, the one series whose label the adapter looks at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from exporter import names

Sample = tuple[str, dict[str, str], float]

WANTED = frozenset({
    names.GPU_BUSY_RATIO, names.REQUESTS_PER_SECOND, names.QUEUE_DELAY_SECONDS, names.CACHE_MISSES_PER_SECOND,
    names.LRU_AGE_SECONDS, names.CACHE_USED_RATIO, names.MODELS_LOADED, names.LAST_SUCCESS_TIMESTAMP,
    names.COLLECTOR_SUCCESS,
})
_LABELLED = names.LAST_SUCCESS_TIMESTAMP

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"'
_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?Inf|NaN"
_SAMPLE = re.compile(rf"({_NAME})(?:\{{((?:{_LABEL}(?:,{_LABEL})*)?)\}})? ({_NUMBER})(?: -?[0-9]+)?")
_COMMENT = re.compile(
    rf"# HELP {_NAME} [^\\\n]*|# HELP {_NAME}|# TYPE {_NAME} (?:counter|gauge|histogram|summary|untyped)")
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


def fast_samples(text: str) -> list[Sample] | None:
    """The wanted samples, or None when the text holds anything this reader does not know for certain."""
    found: list[Sample] = []
    match_sample = _SAMPLE.fullmatch
    for line in text.split("\n"):
        if not line:
            continue
        if line[0] == "#":
            if _COMMENT.fullmatch(line) is None:
                return None
            continue
        matched = match_sample(line)
        if matched is None:
            return None
        name, label_text = matched.group(1), matched.group(2)
        labels: dict[str, str] = {}
        if label_text and label_text.count("=") > 1:
            pairs = _PAIR.findall(label_text)
            labels = dict(pairs)
            if len(labels) != len(pairs):
                return None  # a repeated label name: the library refuses it
        if name in WANTED:
            if name == _LABELLED and label_text and not labels:
                labels = dict(_PAIR.findall(label_text))
            found.append((name, labels if name == _LABELLED else {}, float(matched.group(3))))
    return found


def wanted(samples: Iterable[Sample]) -> list[Sample]:
    """Only the samples the adapter reads, as `fast_samples` returns them (for comparing with the library)."""
    return [sample for sample in samples if sample[0] in WANTED]
