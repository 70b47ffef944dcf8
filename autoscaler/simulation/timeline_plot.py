"""timeline.png: the load, each policy's replicas, delayed requests and cold loads over time.

It uses matplotlib, imported only here and only when a plot is drawn, so the adapter itself never loads it (it
is the `simulate` extra: `pip install modelmesh-autoscaler[simulate]`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from autoscaler.simulation.engine import PolicyResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _downsample(values: Sequence[float], group: int, how: str) -> list[float]:
    out = []
    for i in range(0, len(values), group):
        chunk = values[i:i + group]
        out.append(max(chunk) if how == "max" else sum(chunk))
    return out


FEW_POINTS = 30
"""Under this many points a panel marks each one: a line alone shows nothing of one or two."""


def load_steps(interval_s: float, load_rps: Sequence[float]) -> tuple[list[float], list[float]]:
    """The load panel's points in hours, drawn as steps: each interval's rate held from its start to the next
    one's, and the last to the trace's end. A line through the starts put each change an interval early and
    cut the last interval off the axis."""
    hours = [interval_s * i / 3600.0 for i in range(len(load_rps) + 1)]
    return hours, [*load_rps, *load_rps[-1:]]


COLORS: Final = {"fixed": "tab:blue", "fixed-max": "tab:orange", "mean-hpa": "tab:green", "skew-aware": "tab:red"}
"""Each policy's colour in every panel, whichever policies a run has (--policies)."""
OTHER_COLORS: Final = ("tab:purple", "tab:brown", "tab:pink", "tab:olive")
REFERENCES: Final = ("fixed", "fixed-max")
"""The policies drawn for reference: thin and dashed, over the others. Drawn first and widest, fixed's and
fixed-max's lines at 0 hid the autoscaled policies' few delays and cold loads under a band 6 points high."""
WIDTHS: Final = (3.6, 1.8, 1.0)
"""Line widths of the autoscaled policies in the order drawn, widest first: a line drawn over an equal one is
narrower, so each shows a band of its colour (fixed was hidden under skew-aware, and the cold-loads panel, equal
for all four, showed only skew-aware's)."""
REFERENCE_STYLES: Final = ((1.8, (0, (3, 5))), (1.8, (4, (3, 5))))
"""Width and dash pattern of the reference policies, drawn over the others in that order: short dashes, the
second's in the first's gaps, so where all are equal each shows, and half of what lies under them shows between."""


def policy_style(index: int, name: str, reference: bool = False) -> dict[str, Any]:
    """How the `index`th policy drawn of its group (autoscaled, or `reference`) is drawn: its colour, a width that
    shows it under the lines drawn after it, and a line style (solid; reference lines dashed, above the others)."""
    color = COLORS.get(name, OTHER_COLORS[index % len(OTHER_COLORS)])
    if reference:
        width, style = REFERENCE_STYLES[min(index, len(REFERENCE_STYLES) - 1)]
        return {"color": color, "linewidth": width, "linestyle": style, "zorder": 3}
    return {"color": color, "linewidth": WIDTHS[min(index, len(WIDTHS) - 1)], "linestyle": "-", "zorder": 2}


def drawing_order(results: Sequence[PolicyResult]) -> list[tuple[PolicyResult, dict[str, Any]]]:
    """Each policy with its style, in the order drawn: the autoscaled ones, then the references over them."""
    lead = [r for r in results if r.name not in REFERENCES]
    references = [r for r in results if r.name in REFERENCES]
    return ([(r, policy_style(i, r.name)) for i, r in enumerate(lead)]
            + [(r, policy_style(i, r.name, reference=True)) for i, r in enumerate(references)])


def point_seconds(t_s: Sequence[float], group: int, interval_s: float) -> float:
    """How many seconds each plotted point of a count adds up: the timeline's step times the points summed."""
    step = t_s[1] - t_s[0] if len(t_s) > 1 else interval_s
    return step * group


def timeline_figure(interval_s: float, load_rps: Sequence[float], results: Sequence[PolicyResult],
                    title: str = "") -> Figure:
    """Load, replicas per policy, delayed requests and cold loads over time, in four panels, each policy
    visible where it equals another, whole-number ticks on the counts, each axis with its unit, one legend
    for the three policy panels, and `title` (the trace and the cluster: `timeline_title`) above them."""
    import logging

    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # font cache chatter is not ours to log
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(4, 1, figsize=(11, 10), sharex=True, constrained_layout=True)
    hours, rates = load_steps(interval_s, load_rps)
    dots = "o" if len(hours) < FEW_POINTS else None  # a line through one point draws nothing
    axes[0].step(hours, rates, where="post", color="black", linewidth=0.8, marker=dots, markersize=3)
    axes[0].set_ylabel("load (requests/s)")
    seconds = interval_s
    drawn: dict[str, Any] = {}
    for result, style in drawing_order(results):
        tl = result.timeline
        group = max(1, len(tl.t_s) // 600)
        seconds = point_seconds(tl.t_s, group, interval_s)
        t = [x / 3600.0 for x in tl.t_s[::group]]
        if len(t) < FEW_POINTS:  # the references' points as rings around the others': the same point shows both
            ring = style["zorder"] > 2
            style |= {"marker": "o", "markersize": 7 if ring else 3} | ({"markerfacecolor": "none"} if ring else {})
        style["label"] = result.name
        [drawn[result.name]] = axes[1].step(t, _downsample(tl.replicas, group, "max"), where="post", **style)
        axes[2].plot(t, _downsample(tl.delayed, group, "sum"), **style)
        axes[3].plot(t, _downsample(tl.cold_loads, group, "sum"), **style)
    if hours:
        axes[3].set_xlim(left=min(0.0, hours[0]))  # time starts at 0: one point was centred on a negative axis
    axes[1].set_ylabel("replicas (pods)")
    axes[2].set_ylabel(f"delayed requests\nper {seconds:g} s interval")
    axes[3].set_ylabel(f"cold loads\nper {seconds:g} s interval")
    axes[3].set_xlabel("time (hours)")
    for ax in axes[1:]:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: 0.2 of a cold load means nothing
        low, high = ax.get_ylim()
        if high - low < 2:  # an axis of one count held no two whole numbers, and its ticks read 2.84, 2.88, ...
            ax.set_ylim(low, low + 2)
    if results:  # once for the three panels (it was beside each), beside them, never over lines; in --policies order
        names = [r.name for r in results]
        fig.legend([drawn[name] for name in names], names, loc="outside right upper", fontsize="small")
    if title:
        fig.suptitle(title, fontsize="medium")
    for ax in axes:
        ax.grid(alpha=0.3)
    return fig


def plot_timeline(path: Path, interval_s: float, load_rps: Sequence[float], results: Sequence[PolicyResult],
                  title: str = "") -> None:
    """`timeline_figure` written to `path` (its suffix picks the format)."""
    import matplotlib.pyplot as plt

    fig = timeline_figure(interval_s, load_rps, results, title)
    fig.savefig(path, dpi=90)
    plt.close(fig)
