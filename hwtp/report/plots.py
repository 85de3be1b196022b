"""The report's charts as inline SVG, drawn by matplotlib's SVG backend.

Object-oriented matplotlib (``Figure``, no pyplot state), so charts can be drawn from any
thread. Text stays text (``svg.fonttype: none``, a generic font family: the browser's own),
nothing is rasterised (the kill matrix is a ``pcolormesh`` of vector cells: an ``imshow``
would embed a PNG), each chart's ids are salted apart so several charts share one page, and
no date is written, so the same data gives the same bytes.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib import rc_context
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hwtp.report.data import OUTCOME_ORDER

# Okabe-Ito (distinguishable with colour-blindness), by outcome; white: not evaluated.
OUTCOME_COLOURS = {
    "invalid": "#999999",
    "golden_fail": "#E69F00",
    "passed": "#56B4E9",
    "detected": "#009E73",
    "timeout": "#F0E442",
    "error": "#D55E00",
}
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")
CLASS_COLOURS = {"killable": "#009E73", "equivalent": "#999999", "unknown": "#56B4E9", "nonterminating": "#D55E00"}
_salt = itertools.count()
_PROLOGUE = re.compile(r"\A.*?(?=<svg)", re.S)


def _svg(fig: Figure) -> str:
    """The figure as an ``<svg>`` element (no XML prologue or doctype) for inlining in HTML."""
    buf = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": f"hwtp-{next(_salt)}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return _PROLOGUE.sub("", buf.getvalue(), count=1)


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=96)
    fig.set_facecolor("white")
    return fig


def _style(ax: object) -> None:
    ax.spines[["top", "right"]].set_visible(False)  # type: ignore[attr-defined]
    ax.tick_params(labelsize=8)  # type: ignore[attr-defined]


def reward_histogram(series: Mapping[str, Mapping[float, int]], title: str = "rewards") -> str:
    """Samples per reward value, one bar group per value and one bar per series (share of its
    samples when there are several series, so runs of different sizes compare)."""
    values = sorted({v for counts in series.values() for v in counts})
    fig = _figure(4.6, 2.6)
    ax = fig.add_subplot()
    x = np.arange(len(values))
    width = 0.8 / max(1, len(series))
    share = len(series) > 1
    for i, (name, counts) in enumerate(series.items()):
        total = sum(counts.values()) or 1
        heights = [counts.get(v, 0) / total if share else counts.get(v, 0) for v in values]
        ax.bar(x + i * width - 0.4 + width / 2, heights, width, label=name, color=PALETTE[i % len(PALETTE)])
    ax.set_xticks(x, [f"{v:g}" for v in values])
    ax.set_xlabel("reward", fontsize=8)
    ax.set_ylabel("share of samples" if share else "samples", fontsize=8)
    ax.set_title(title, fontsize=9)
    if len(series) > 1:
        ax.legend(fontsize=7, frameon=False)
    _style(ax)
    return _svg(fig)


def kill_matrix(rows: Sequence[str], cols: Sequence[str], cells: Mapping[tuple[str, str], str], title: str) -> str:
    """Plans (or samples) x states, each cell coloured by its outcome; white: not evaluated."""
    codes = np.full((len(rows), len(cols)), -1.0)
    for (r, c), outcome in cells.items():
        codes[rows.index(r), cols.index(c)] = OUTCOME_ORDER.index(outcome)
    cmap = ListedColormap(["#ffffff", *(OUTCOME_COLOURS[o] for o in OUTCOME_ORDER)])
    norm = BoundaryNorm(np.arange(-1.5, len(OUTCOME_ORDER)), cmap.N)
    width = min(11.0, 1.6 + 0.22 * len(cols))
    height = min(12.0, 1.3 + 0.2 * len(rows))
    fig = _figure(width, height)
    ax = fig.add_subplot()
    ax.pcolormesh(codes, cmap=cmap, norm=norm, edgecolors="#dddddd", linewidth=0.3)
    ax.invert_yaxis()
    ax.set_xticks(np.arange(len(cols)) + 0.5, cols, rotation=90, fontsize=6)
    ax.set_yticks(np.arange(len(rows)) + 0.5, rows, fontsize=6)
    ax.set_xlabel("state", fontsize=8)
    ax.set_title(title, fontsize=9)
    present = sorted(set(cells.values()), key=OUTCOME_ORDER.index)
    ax.legend(
        handles=[Patch(color=OUTCOME_COLOURS[o], label=o) for o in present],
        loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False,
    )
    return _svg(fig)


def advantage_distributions(advantages: Mapping[str, Sequence[float]], shares: Mapping[str, float]) -> str:
    """Histograms of the advantages under each grouping, side by side, with the share of
    groups whose advantages are all zero (no learning signal) in each title."""
    fig = _figure(7.2, 2.4)
    axes = fig.subplots(1, len(advantages), sharey=True, squeeze=False)[0]
    values = [v for vs in advantages.values() for v in vs]
    low, high = (min(values), max(values)) if values else (-1.0, 1.0)
    if high - low < 1e-9:
        low, high = low - 1, high + 1
    bins = np.linspace(low, high, 25)
    for i, (ax, (by, vs)) in enumerate(zip(axes, advantages.items(), strict=True)):
        ax.hist(vs, bins=bins, color=PALETTE[i % len(PALETTE)])
        ax.set_title(f"by {by}: {shares.get(by, 0.0):.0%} of groups all zero", fontsize=8)
        ax.set_xlabel("advantage", fontsize=8)
        _style(ax)
    axes[0].set_ylabel("samples", fontsize=8)
    return _svg(fig)


def stacked_bars(counts: Mapping[str, Mapping[str, int]], colours: Mapping[str, str], xlabel: str) -> str:
    """Horizontal bars, one per key of ``counts``, stacked by the inner keys (e.g. operator
    family x mutant class)."""
    labels = list(counts)
    stacks = sorted({k for inner in counts.values() for k in inner}, key=lambda k: (k not in colours, k))
    fig = _figure(5.2, min(8.0, 0.9 + 0.28 * len(labels)))
    ax = fig.add_subplot()
    left = np.zeros(len(labels))
    for i, key in enumerate(stacks):
        widths = np.array([counts[label].get(key, 0) for label in labels], dtype=float)
        ax.barh(labels, widths, left=left, label=key, color=colours.get(key, PALETTE[i % len(PALETTE)]))
        left += widths
    ax.invert_yaxis()
    ax.set_xlabel(xlabel, fontsize=8)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _style(ax)
    return _svg(fig)


def bars(counts: Mapping[str, float], xlabel: str) -> str:
    """One horizontal bar per key (e.g. mutants killed per test)."""
    labels = list(counts)
    fig = _figure(5.2, min(8.0, 0.8 + 0.26 * len(labels)))
    ax = fig.add_subplot()
    ax.barh(labels, list(counts.values()), color=PALETTE[0])
    ax.invert_yaxis()
    ax.set_xlabel(xlabel, fontsize=8)
    _style(ax)
    return _svg(fig)
