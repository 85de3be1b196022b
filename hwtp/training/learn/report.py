"""What a person reads of a results.json: the before/after table (markdown) and its rows."""

from __future__ import annotations

from typing import Any

#: The splits shown, in order, with their headings.
SPLITS = {"held_out": "held-out mutants", "held_out_design": "held-out designs", "train": "training states"}
_METRICS = {"detection": "detection", "golden_pass": "golden pass", "invalid": "invalid"}


def _cell(stats: dict[str, Any] | None) -> str:
    if not stats or stats.get("mean") is None:
        return "not recorded"
    mean = f"{stats['mean']:.1%}"
    if stats.get("n", 0) > 1:
        return f"{mean} ({stats['min']:.1%}..{stats['max']:.1%})"
    return mean


def rows(results: dict[str, Any]) -> list[dict[str, str]]:
    """One row per (split, arm): each metric before → after, as text (mean, min..max over seeds)."""
    out = []
    summary = results.get("summary") or {}
    for split, heading in SPLITS.items():
        for arm, per_split in summary.items():
            if split not in per_split:
                continue
            row = {"split": heading, "arm": arm}
            for key, name in _METRICS.items():
                stats = per_split[split][key]
                row[name] = f"{_cell(stats['before'])} → {_cell(stats['after'])}"
            row["zero-advantage groups"] = _cell(per_split.get("zero_advantage_groups"))
            out.append(row)
    return out


def table(results: dict[str, Any]) -> str:
    """The markdown table of :func:`rows`, with the sample counts under it."""
    body = rows(results)
    if not body:
        return "(no finished seed yet)"
    heads = list(body[0])
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(r[h] for h in heads) + " |" for r in body]
    runs = results.get("runs") or []
    if runs:
        first = runs[0]["before"]
        counts = ", ".join(
            f"{SPLITS.get(k, k)}: {v['samples']} plans on {v['states']} states" for k, v in first.items()
        )
        lines.append("")
        lines.append(
            f"{len(runs)} seed(s); per seed and evaluation {counts}. Cells: before → after GRPO, "
            "mean over seeds (min..max)."
        )
    return "\n".join(lines)
