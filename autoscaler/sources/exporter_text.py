"""A fast, strict reader of the exporter's own `/metrics` text, with `prometheus_client`'s parser behind it.

The adapter scrapes every exporter every refresh; `prometheus_client`'s text parser costs about 300 µs per
exporter response (580 µs with 8 GPUs), most of a 2,000-pod refresh. Both ends of this format are ours
(`exporter/names.py`, rendered by `prometheus_client`), so a narrow reader is enough: regular expressions
accepting exactly the shapes the exporter writes (`# HELP`, `# TYPE`, `name{label="value",...}
value [timestamp]`, label values with no escapes but the format's three (`\\\\`, `\\"`, `\\n`: a model's id may hold
them), plain numbers, `NaN`, `+Inf`, `-Inf`). Anything else (another escape, odd spacing, another float
spelling, a comment of another kind) makes it give up, and the caller
parses the whole text with the library instead, so the fast path can only ever agree with the library
(`tests/sources/test_exporter_text.py` checks that on fuzzed input with hypothesis).

It returns only the samples the adapter reads (`WANTED`), in order, as `(name, labels, value)`; labels are decoded
only for the series whose labels the adapter looks at (`LABELLED`: the freshness timestamps, the collectors'
successes, the per-model last-served times, one sample per model the pod served recently, and the pod the exporter
says it runs in). The text is checked in
one regular-expression pass and the wanted samples found in another, both in C: reading it line by line in Python cost
about twice as much (`bench/bench_exporter_text.py`). The per-model lines, the bulk of a text with them, are read
apart (`_plain_run`, else `_MODEL_RUN`), and so is the family naming the pod (`_POD_FAMILY_START`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from autoscaler.sources.exporter_text_limits import MAX_LABELS_PER_LINE
from exporter import names
from exporter.pod_identity import POD_INFO_HELP

Sample = tuple[str, dict[str, str], float]

WANTED = frozenset({
    names.GPU_BUSY_RATIO, names.REQUESTS_PER_SECOND, names.QUEUE_DELAY_SECONDS, names.CACHE_MISSES_PER_SECOND,
    names.LRU_AGE_SECONDS, names.CACHE_USED_RATIO, names.MODELS_LOADED, names.LAST_SUCCESS_TIMESTAMP,
    names.COLLECTOR_SUCCESS, names.EXPORTER_TIME, names.MODEL_LAST_SERVED_TIMESTAMP, names.POD_INFO,
    names.MODEL_RECENCY_HORIZON, names.COLLECTOR_DURATION_SECONDS,
})
LABELLED = frozenset({names.LAST_SUCCESS_TIMESTAMP, names.COLLECTOR_SUCCESS, names.MODEL_LAST_SERVED_TIMESTAMP,
                      names.POD_INFO, names.COLLECTOR_DURATION_SECONDS})
"""The wanted series whose labels the adapter reads (which collector a timestamp, a success or an attempt's
duration is of; a per-model time's model; which pod the exporter runs in); the others' samples come with empty
labels."""

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_PLAIN_VALUE = r'[^"\\\n]*'
_VALUE_TEXT = r'[^"\\\n]*(?:\\[\\"n][^"\\\n]*)*'
"""A label value's text: no quote, backslash or newline but in the three escapes (unrolled: one character class
per run). Texts without a backslash, every exporter's but for an odd model id, are checked with the plain class
alone (`_PLAIN_VALUE`): the escapes cost the usual text nothing."""
_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?Inf|NaN"
_NOT_WANTED_COUNTER = "".join(rf"(?<!# TYPE {re.escape(name)} counter)" for name in sorted(WANTED))
"""After `counter`: the line did not declare a wanted series a counter, whose samples the library renames
(`_total`); checked only at the end of a counter's TYPE line, of which the exporter writes one."""
_COMMENT = (rf"# HELP {_NAME} [^\\\n]*|# HELP {_NAME}"
            rf"|# TYPE {_NAME} (?:counter{_NOT_WANTED_COUNTER}|gauge|histogram|summary|untyped)")


def _document(value: str) -> re.Pattern[str]:
    """Every line empty, a comment or a sample of the shapes above, with at most `MAX_LABELS_PER_LINE` labels:
    checked in one pass over the text. A line with more is given up on, and refused before the library reads it
    (`exporter_text_limits.over_limit`)."""
    label = rf'{_LABEL_NAME}="{value}"'
    sample = rf"{_NAME}(?:\{{(?:{label}(?:,{label}){{0,{MAX_LABELS_PER_LINE - 1}}})?\}})? (?:{_NUMBER})(?: -?[0-9]+)?"
    line = rf"(?:{_COMMENT}|{sample})?"
    return re.compile(rf"{line}(?:\n{line})*")


def _repeated_label(value: str) -> re.Pattern[str]:
    """A sample line naming a label twice, which the library refuses. Each label of a line is tried as the first
    of the two against the labels after it, so its cost is the line's length times its labels: bounded, as in
    `_document`, by `MAX_LABELS_PER_LINE` (unbounded, one tenant's line of 25,000 labels cost minutes)."""
    label = rf'{_LABEL_NAME}="{value}"'
    others = rf"(?:{label},){{0,{MAX_LABELS_PER_LINE - 2}}}"
    return re.compile(rf'\n{_NAME}\{{{others}({_LABEL_NAME})="{value}",{others}\1="')


_DOCUMENT, _ESCAPED_DOCUMENT = _document(_PLAIN_VALUE), _document(_VALUE_TEXT)
_REPEATED_LABEL, _ESCAPED_REPEATED_LABEL = _repeated_label(_PLAIN_VALUE), _repeated_label(_VALUE_TEXT)
_WANTED_SAMPLE = re.compile(
    rf"\n({'|'.join(re.escape(name) for name in sorted(WANTED, key=len, reverse=True))})"
    rf"(?:\{{([^\n]*)\}})? ({_NUMBER})")
"""A wanted sample at the start of a line (of a text already checked: its label text ends at the line's last
brace), found with the leading newline as a literal prefix, so that the search skips the other lines fast."""


def _model_line(group: str) -> str:
    """A line of the per-model series as the exporter writes it, its id and value in groups `group` opens."""
    name = re.escape(names.MODEL_LAST_SERVED_TIMESTAMP)
    return rf'\n{name}\{{{names.MODEL_ID_LABEL}="{group}{_VALUE_TEXT})"\}} {group}{_NUMBER})(?: -?[0-9]+)?'


_MODEL_RUN = re.compile(rf"(?:{_model_line('(?:')})+(?=\n)")
"""The first run of whole lines of the per-model series in the exporter's own shape (its one label): one sample
per model the pod served recently, up to hundreds, the bulk of such a text. Checked and read in two passes of
their own, and cut out of the text the general passes check, whose per-line cost is several times theirs (the
label decoded into a dict per sample). Model lines of any other shape stay in the text, read the general way."""
_PAIR = re.compile(rf'({_LABEL_NAME})="({_VALUE_TEXT})"')
_MODEL_LINE_START = f"\n{names.MODEL_LAST_SERVED_TIMESTAMP}{{"
_MODEL_SAMPLE_START = f"\n{names.MODEL_LAST_SERVED_TIMESTAMP}"
_MODEL_ID_START = f'{_MODEL_LINE_START}{names.MODEL_ID_LABEL}="'
_ESCAPE = re.compile(r'\\[\\"n]')
_POD_FAMILY_START = (f"\n# HELP {names.POD_INFO} {POD_INFO_HELP}\n# TYPE {names.POD_INFO} gauge"
                      f'\n{names.POD_INFO}{{namespace="')
_POD_SAMPLE_REST = re.compile(
    rf'({_PLAIN_VALUE})",pod="({_PLAIN_VALUE})",uid="({_PLAIN_VALUE})"\}} ({_NUMBER})(?=\n)')
"""The family naming the pod as the exporter writes it (`exporter.collectors.pod`: its comments, then one sample with
all three labels in this order, no escape in a Kubernetes name or uid, no timestamp): its comments and the
sample's start found as one string, the rest of the sample matched by one anchored expression, and the whole cut
out of the text. The general passes checked its three lines, looked for a repeated label and decoded the labels
into a dict by a second expression: 15% more instructions a read for one line (`bench/bench_exporter_text.py`).
Of any other shape (another HELP, a label not given, another order) it stays for the general way."""
_POD_SAMPLE_OFFSET = len(_POD_FAMILY_START) - len(f'\n{names.POD_INFO}{{namespace="')
"""Where the family's sample line starts in it: the exporter writes the family last, so it is looked for only
there, the text's last line and the two before (a text without it, from a sidecar before it, costs a look at its
last line, not a search)."""
_UNESCAPED = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_ERRORS_FAMILY_START = (f"\n# HELP {names.SCRAPE_ERRORS_TOTAL} {names.SCRAPE_ERRORS_HELP}"
                         f"\n# TYPE {names.SCRAPE_ERRORS_TOTAL} counter")
_ERRORS_RUN = re.compile(
    rf'(?:\n{re.escape(names.SCRAPE_ERRORS_TOTAL)}\{{collector="[a-z]+",reason="[a-z_]+"\}} [0-9]+\.[0-9]+)+(?=\n)')
"""The exporter's failed reads by collector and reason as it writes them (`exporter.collectors.health`: its comments,
then a sample per reason each running collector counts, at 0 from its start, two plain labels in this order, a
count as prometheus_client writes one): found by its comments as one string and its samples checked by one
anchored expression, then cut out of the text. The adapter reads none of it here (only the words of a failing
ModelMesh collector, from the library, `exposition.modelmesh_failed_reads`); checked by the general passes, its ten
labelled lines cost a read 47% more instructions (`bench/bench_exporter_text.py`). Of any other shape it stays for
the general way."""


def _unescape(value: str) -> str:
    return _ESCAPE.sub(lambda escape: _UNESCAPED[escape[0]], value) if "\\" in value else value


def _labels(label_text: str) -> dict[str, str]:
    return {label: _unescape(value) for label, value in _PAIR.findall(label_text)}


FastRead = tuple[list[Sample], Sequence[str], Sequence[float]]
"""What `fast_read` finds: the wanted samples but for the usual run of per-model lines, and that run's model ids
and values apart, in the text's order (empty without such a run), for the caller to take in whole
(`exposition.read_exporter_text` makes its models' dict of them in C, not a sample at a time). A plain tuple: a
named one's constructor is a Python call, 1% of an exporter's response without models."""


def fast_samples(text: str) -> list[Sample] | None:
    """The wanted samples, or None when the text holds anything this reader does not know for certain; in the
    text's order per series name (the per-model series' run, when it is the series' only lines, comes last)."""
    read = fast_read(text)
    if read is None:
        return None
    samples, model_ids, model_values = read
    name, label = names.MODEL_LAST_SERVED_TIMESTAMP, names.MODEL_ID_LABEL
    return samples + [(name, {label: model}, value) for model, value in zip(model_ids, model_values, strict=True)]


def fast_read(text: str) -> FastRead | None:
    """`fast_samples`' reading with the usual run of per-model lines (`_plain_run`) as ids and values, or None."""
    text = _without_errors_family(text)
    found = pod_family(text)
    if found is None:
        return _models_apart(text)
    read = _models_apart(text[:found.start() - len(_POD_FAMILY_START)] + text[found.end():])
    if read is None:
        return None
    if any(sample[0] == names.POD_INFO for sample in read[0]):
        return _models_apart(text)  # another sample of the series: all read the general way, in the text's order
    namespace, pod, uid, value = found.groups()
    read[0].append((names.POD_INFO, {"namespace": namespace, "pod": pod, "uid": uid}, float(value)))
    return read


def _without_errors_family(text: str) -> str:
    """`text` without the family of the exporter's failed reads where it is in the exporter's own shape
    (`_ERRORS_FAMILY_START`), else as it is."""
    start = text.find(_ERRORS_FAMILY_START)
    if start < 0:
        return text
    run = _ERRORS_RUN.match(text, start + len(_ERRORS_FAMILY_START))
    return text if run is None else text[:start] + text[run.end():]


def pod_family(text: str) -> re.Match[str] | None:
    """The sample's labels and value of the family naming the pod, where it ends `text` in the exporter's own shape
    (`_POD_FAMILY_START`), else None. Nothing is made for a text without it (a sidecar's from before it)."""
    start = text.rfind("\n", 0, len(text) - 1) - _POD_SAMPLE_OFFSET
    if start < 0 or not text.startswith(_POD_FAMILY_START, start):
        return None
    return _POD_SAMPLE_REST.match(text, start + len(_POD_FAMILY_START))


def _models_apart(text: str) -> FastRead | None:
    """`fast_read` of a text without the pod's line apart."""
    start = text.find(_MODEL_LINE_START)
    if start < 0:
        return _general_read(text)
    plain = _plain_run(text, start)
    model_ids: Sequence[str]
    model_values: Sequence[float]
    if plain is not None:
        end, model_ids, model_values = plain
        run_samples: list[Sample] = []
    else:
        run = _MODEL_RUN.match(text, start)
        if run is None:
            return _general_read(text)
        end, run_samples, model_ids, model_values = run.end(), list(_run_samples(run[0])), (), ()
    rest = text[:start] + text[end:]
    if rest.startswith(names.MODEL_LAST_SERVED_TIMESTAMP) or _MODEL_SAMPLE_START in rest:
        return _general_read(text)  # more model lines elsewhere: read all in the text's order
    samples = _general_samples(rest)
    if samples is None:
        return None
    samples.extend(run_samples)
    return samples, model_ids, model_values


def _general_read(text: str) -> FastRead | None:
    """Every wanted sample of `text` read the general way (no run of model lines apart)."""
    samples = _general_samples(text)
    return None if samples is None else (samples, (), ())


_PLAIN_MODEL_LINE = re.compile(
    rf'\n{re.escape(names.MODEL_LAST_SERVED_TIMESTAMP)}\{{{names.MODEL_ID_LABEL}="([^"]*)"\}} ([-+.0-9eE]+)(?=\n)')
"""A line of the per-model series as the exporter writes it with a plain number (the usual one), its id and value
in groups; an id of any character but a quote here, which `_plain_run` narrows to `_MODEL_RUN`'s."""
_PLAIN_LINE_EXTRA = len(_MODEL_ID_START) + len('"} ')
"""A `_PLAIN_MODEL_LINE`'s characters other than its id's and value's."""


def _plain_run(text: str, start: int) -> tuple[int, list[str], list[float]] | None:
    """The run of model lines at `start` when it is the usual one, read in one regular-expression pass (and a few
    string methods) over the run: `(end, ids, values)` with the run ending at `end`, or None to read it the
    general way (`_MODEL_RUN`, whose per-line work is twice this one's, and `_run_samples`).

    The usual run: every line up to the next comment (the next family's HELP) a `_PLAIN_MODEL_LINE` with no
    backslash or newline in its id, whose value `float` reads. The matches, each from a line's start to its
    end (an id without a newline), tile the run when their lengths add up to it. A value of those characters
    that `float` reads is one of `_NUMBER`'s numbers, so the lines are `_MODEL_RUN`'s, the run the one it
    matches (it stops at the comment), and the samples those of `_run_samples` (an id without escapes is as
    written)."""
    end = _comment_after(text, start)
    if end < 0:
        return None
    lines = _PLAIN_MODEL_LINE.findall(text, start, end + 1)
    if not lines:
        return None
    ids, texts = zip(*lines, strict=True)
    id_chars = "".join(ids)  # a value's characters are never a newline or backslash
    if (len(id_chars) + len("".join(texts)) + _PLAIN_LINE_EXTRA * len(ids) != end - start
            or "\n" in id_chars or "\\" in id_chars):
        return None
    try:
        return end, list(ids), list(map(float, texts))
    except ValueError:  # a value of number characters that is no number (`1e`, `--1`, `.`)
        return None


def _comment_after(text: str, start: int) -> int:
    """Where the first line after `start` that starts with `#` starts (its newline), or -1: `text.find("\\n#",
    start + 1)` for a `start` at a newline followed by no `#`, found with `memchr` (the usual `#` after a
    run of model lines is the next family's HELP), where the two-character search tests every character."""
    at = text.find("#", start)
    if at < 0:
        return -1
    return at - 1 if text[at - 1] == "\n" else text.find("\n#", at)


def _run_samples(run: str) -> Iterable[Sample]:
    """The samples of a run `_MODEL_RUN` has checked, cut apart with string methods, not read again with its
    groups (9.4 k instructions a model that way, 5.5 k this one): each line's start is the id's start (a raw
    newline is never in an id), the id ends at the line's last `"} ` (a value and a timestamp hold no quote),
    and the value at the space before a timestamp, if any."""
    for line in run.split(_MODEL_ID_START)[1:]:
        model, _, value = line.rpartition('"} ')
        yield (names.MODEL_LAST_SERVED_TIMESTAMP,
               {names.MODEL_ID_LABEL: _unescape(model) if "\\" in model else model}, float(value.partition(" ")[0]))


def _general_samples(text: str) -> list[Sample] | None:
    repeated = _REPEATED_LABEL
    if _DOCUMENT.fullmatch(text) is None:
        if "\\" not in text or _ESCAPED_DOCUMENT.fullmatch(text) is None:
            return None
        repeated = _ESCAPED_REPEATED_LABEL
    lines = "\n" + text
    if repeated.search(lines) is not None:
        return None
    return [(name, _labels(label_text) if label_text and name in LABELLED else {}, float(value))
            for name, label_text, value in _WANTED_SAMPLE.findall(lines)]


def wanted(samples: Iterable[Sample]) -> list[Sample]:
    """Only the samples the adapter reads, as `fast_samples` returns them (for comparing with the library)."""
    return [sample for sample in samples if sample[0] in WANTED]
