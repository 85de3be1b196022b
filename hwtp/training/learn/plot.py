"""The learning curves of ``hwtp learn`` as one picture (``OUT/learning_curves.png``): mean reward
and zero-advantage group share per step (mean over seeds, min..max band) for each arm, and
held-out detection and golden pass before and after training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PICTURE = "learning_curves.png"


def _curve(runs: list[dict[str, Any]], arm: str, key: str) -> tuple[list[int], list[float], list[float], list[float]]:
    by_step: dict[int, list[float]] = {}
    for r in runs:
        for s in r["arms"][arm]["steps"]:
            if key in s:
                by_step.setdefault(int(s["step"]), []).append(float(s[key]))
    steps = sorted(by_step)
    mean = [sum(by_step[k]) / len(by_step[k]) for k in steps]
    return steps, mean, [min(by_step[k]) for k in steps], [max(by_step[k]) for k in steps]


def figure(results: dict[str, Any]) -> Any:
    """The matplotlib figure of ``results`` (the content of results.json)."""
    from matplotlib.figure import Figure

    runs = results["runs"]
    arms = [a["name"] for a in results["config"]["arms"]]
    fig = Figure(figsize=(13, 3.6))
    axes = fig.subplots(1, 3)
    for arm in arms:
        for ax, key, title in (
            (axes[0], "reward", "mean reward per step"),
            (axes[1], "zero_advantage_groups", "zero-advantage groups"),
        ):
            steps, mean, lo, hi = _curve(runs, arm, key)
            if not steps:
                continue
            (line,) = ax.plot(steps, mean, label=arm)
            ax.fill_between(steps, lo, hi, alpha=0.2, color=line.get_color())
            ax.set_title(title)
            ax.set_xlabel("GRPO step")
    axes[0].legend()
    axes[1].set_ylim(-0.05, 1.05)
    ax = axes[2]
    split = "held_out"
    labels = ["SFT start", *arms]
    for offset, metric in ((-0.2, "detection"), (0.2, "golden_pass")):
        means, errs = [], []
        for label in labels:
            if label == "SFT start":
                vals = [r["before"][split][metric] for r in runs if split in r["before"]]
            else:
                vals = [r["arms"][label]["after"][split][metric] for r in runs if split in r["arms"][label]["after"]]
            m = sum(vals) / len(vals) if vals else 0.0
            means.append(m)
            errs.append([[m - min(vals, default=m)], [max(vals, default=m) - m]])
        xs = [i + offset for i in range(len(labels))]
        ax.bar(xs, means, width=0.4, label=metric.replace("_", " "))
        for x, m, e in zip(xs, means, errs, strict=True):
            ax.errorbar([x], [m], yerr=e, color="black", capsize=3)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylim(0, 1.05)
    ax.set_title("held-out mutants (min..max over seeds)")
    ax.legend()
    fig.tight_layout()
    return fig


def plot_results(results: dict[str, Any], out: Path) -> Path:
    """Draw ``results`` into ``OUT/learning_curves.png``."""
    path = out / PICTURE
    figure(results).savefig(path, dpi=110)
    return path


def svg(results: dict[str, Any]) -> str:
    """The picture as SVG text (for ``hwtp report``)."""
    import io

    buffer = io.StringIO()
    figure(results).savefig(buffer, format="svg")
    return buffer.getvalue()
