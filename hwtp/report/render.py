"""The report page: views (:mod:`hwtp.report.data`) and charts (:mod:`hwtp.report.plots`)
rendered by a Jinja2 template that escapes every value by default.

Only the charts are inserted as markup (``Markup``): matplotlib writes them and escapes the
labels it draws. Everything else, completions and source lines included, is text.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from hwtp import __version__
from hwtp.report import plots
from hwtp.report.data import CiView, DesignView, LearnView, RunView, View


@dataclass
class Chart:
    svg: Markup
    caption: str


def _chart(svg: str, caption: str) -> Chart:
    """A chart from :mod:`hwtp.report.plots`: markup matplotlib wrote, its text escaped."""
    return Chart(Markup(svg), caption)  # noqa: S704 - matplotlib's own SVG, labels escaped by it


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("hwtp.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda v: "not recorded" if v is None else f"{v:.1%}"
    env.filters["num"] = lambda v: "not recorded" if v is None else f"{v:,}"
    env.filters["secs"] = lambda v: "not recorded" if v is None else f"{v:.3f} s"
    return env


def _design_charts(d: DesignView) -> dict[str, Chart | None]:
    matrix = (
        _chart(plots.kill_matrix(d.matrix_rows, d.matrix_cols, d.matrix, f"{d.name}: kill matrix"),
              f"{d.name}: {len(d.matrix_rows)} plans x {len(d.matrix_cols)} states, coloured by outcome")
        if d.matrix
        else None
    )
    advantages = (
        _chart(plots.advantage_distributions(d.advantages, d.zero_share),
              f"{d.name}: advantages grouped by state vs by design")
        if d.advantages
        else None
    )
    return {"matrix": matrix, "advantages": advantages}


def _run_context(view: RunView) -> dict[str, Any]:
    rewards = {d.name: d.rewards for d in view.designs if d.samples}
    per_design = {d.name: _design_charts(d) for d in view.designs}
    families: dict[str, Counter[str]] = defaultdict(Counter)
    statuses: Counter[str] = Counter()
    for m in view.mutants or ():
        statuses[m.status] += 1
        if m.status == "valid":
            families[m.family][m.klass] += 1
    return {
        "reward_chart": _chart(plots.reward_histogram(rewards, "samples per reward"),
                              "samples per reward value, per design") if rewards else None,
        "overall_advantages": _design_charts(view.overall)["advantages"],
        "per_design": per_design,
        "family_chart": _chart(plots.stacked_bars(families, plots.CLASS_COLOURS, "valid mutants"),
                              "valid mutants by operator family and class") if families else None,
        "families": {f: dict(c) for f, c in sorted(families.items())},
        "classes": sorted({k for c in families.values() for k in c}),
        "statuses": dict(statuses.most_common()),
    }


def _ci_context(view: CiView) -> dict[str, Any]:
    chart = (
        _chart(plots.bars(view.killed_by_test, "mutants killed"), "mutants killed by each test")
        if view.killed_by_test
        else None
    )
    return {"killed_chart": chart}


def _learn_context(view: LearnView) -> dict[str, Any]:
    from hwtp.training.learn.plot import svg

    if not view.results["runs"]:
        return {"learn_chart": None}
    caption = ("mean reward and zero-advantage groups per GRPO step (mean over seeds, min..max band); "
               "held-out detection and golden pass before and after")
    return {"learn_chart": _chart(svg(view.results), caption)}


def _comparison(views: list[View]) -> dict[str, Any] | None:
    runs = [v for v in views if isinstance(v, RunView)]
    if len(runs) < 2:
        return None
    series = {f"{i + 1}: {v.label}": v.overall.rewards for i, v in enumerate(runs)}
    return {
        "runs": runs,
        "chart": _chart(plots.reward_histogram(series, "rewards, side by side"),
                       "share of samples per reward value, per source"),
    }


def render(views: list[View]) -> str:
    """The whole page for ``views`` (one per source, in order)."""
    template = _environment().get_template("report.html.j2")
    sources = []
    for i, view in enumerate(views):
        if isinstance(view, LearnView):
            sources.append({"index": i, "view": view, "kind": "learn", **_learn_context(view)})
            continue
        extra = _run_context(view) if isinstance(view, RunView) else _ci_context(view)
        sources.append({"index": i, "view": view, "kind": "ci" if isinstance(view, CiView) else view.kind, **extra})
    return template.render(
        sources=sources,
        comparison=_comparison(views),
        version=__version__,
        created=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        colours=plots.OUTCOME_COLOURS,
    )
