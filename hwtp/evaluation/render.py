"""Markdown of an evaluation (``eval.md``) and two evaluations side by side (``hwtp eval compare``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hwtp.errors import ConfigError


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _ci(pair: list[float] | None) -> str:
    return "–" if not pair else f"[{100 * pair[0]:.1f}, {100 * pair[1]:.1f}]"


def markdown(doc: dict[str, Any]) -> str:
    """The evaluation as Markdown: settings, the overall numbers with their intervals, pass@k,
    per design, invalid-plan reasons, tokens and time."""
    s, o, ks = doc["settings"], doc["overall"], doc["ks"]
    who = s.get("model") or s["policy"]
    model = f" model `{s['model']}`" if s.get("model") else ""
    lines = [
        f"# hwtp eval: {who}",
        "",
        f"policy `{s['policy']}`{model}, split "
        f"`{s.get('split') or '-'}`, {len(doc['designs'])} designs, G={s['samples']}, "
        f"{s['states']} mutants per design, seed {s['seed']}",
        "",
        "| metric | value | Wilson 95% | bootstrap 95% over designs |",
        "|---|---:|---:|---:|",
    ]
    boot = o.get("bootstrap95_over_designs", {})
    for key, label in (("golden_pass_rate", "golden pass rate"), ("detection_rate", "detection rate")):
        lines.append(f"| {label} | {_pct(o[key])} | {_ci(o['wilson95'][key])} | {_ci(boot.get(key))} |")
    lines += ["", "Wilson: samples as independent trials; bootstrap: 1000 resamples of the designs."]
    lines += ["", "| pass@k | " + " | ".join(f"k={k}" for k in ks) + " |", "|---|" + "---:|" * len(ks)]
    for kind in ("golden", "detect"):
        lines.append(f"| {kind} | " + " | ".join(_pct(o["pass_at_k"][kind].get(str(k))) for k in ks) + " |")
    lines += ["", "| design | samples | golden pass | detect | invalid |", "|---|---:|---:|---:|---:|"]
    for name, d in doc["designs"].items():
        invalid = d["outcomes"].get("invalid", 0) + d["outcomes"].get("golden_fail", 0)
        lines.append(
            f"| {name} | {d['samples']} | {_pct(d['golden_pass_rate'])} | {_pct(d['detection_rate'])} | {invalid} |"
        )
    if o["invalid_reasons"]:
        lines += ["", "| invalid-plan reason | samples |", "|---|---:|"]
        lines += [f"| {reason.replace('|', '/')} | {n} |" for reason, n in o["invalid_reasons"].items()]
    lat = o["latency_s"]
    lines += [
        "",
        f"tokens: {o['tokens']['prompt']} prompt, {o['tokens']['completion']} completion; "
        f"latency per sample: mean {_secs(lat['mean'])}, p50 {_secs(lat['p50'])}, p95 {_secs(lat['p95'])}; "
        f"policy {o['seconds']['policy']} s, hwtp {o['seconds']['hwtp']} s "
        f"({o['hwtp_ms_per_sample']} ms/sample), mutation {o['seconds']['mutate']} s",
        "",
    ]
    return "\n".join(lines)


def _secs(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s"


def load_eval(path: Path) -> dict[str, Any]:
    """An ``eval.json`` (or the folder holding one)."""
    file = path / "eval.json" if path.is_dir() else path
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
        if not all(isinstance(doc.get(k), dict) for k in ("overall", "designs", "settings")):
            raise ValueError("no overall, designs or settings")
    except (OSError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{file}: not an hwtp eval result ({exc})") from exc
    return dict(doc)


def compare(a: dict[str, Any], b: dict[str, Any], labels: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """Two evaluations side by side: overall and per shared design, B minus A; what differs in
    their settings (other than the policy) and designs only one has."""

    def pair(x: dict[str, Any], y: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key in ("golden_pass_rate", "detection_rate"):
            out[key] = {labels[0]: x[key], labels[1]: y[key], "delta": y[key] - x[key]}
        for kind in ("golden", "detect"):
            for k, value in x["pass_at_k"][kind].items():
                other = y["pass_at_k"][kind].get(k)
                if value is not None and other is not None:
                    out[f"{kind}_pass@{k}"] = {labels[0]: value, labels[1]: other, "delta": other - value}
        return out

    policy_keys = {"policy", "model", "endpoint", "temperature", "top_p", "max_tokens", "replay_from"}
    differ = {
        k: [a["settings"].get(k), b["settings"].get(k)]
        for k in sorted(set(a["settings"]) | set(b["settings"]))
        if k not in policy_keys and a["settings"].get(k) != b["settings"].get(k)
    }
    shared = [d for d in a["designs"] if d in b["designs"]]
    sets_differ = [d for d in shared if a["designs"][d].get("mutant_set") != b["designs"][d].get("mutant_set")]
    return {
        "labels": list(labels),
        "overall": pair(a["overall"], b["overall"]),
        "designs": {d: pair(a["designs"][d], b["designs"][d]) for d in shared},
        "settings_differ": differ,
        "mutant_sets_differ": sets_differ,
        "only_in": {
            labels[0]: [d for d in a["designs"] if d not in b["designs"]],
            labels[1]: [d for d in b["designs"] if d not in a["designs"]],
        },
    }


def compare_markdown(doc: dict[str, Any]) -> str:
    la, lb = doc["labels"]
    lines = [f"# hwtp eval: {la} vs {lb}", "", f"| metric | {la} | {lb} | Δ |", "|---|---:|---:|---:|"]
    for key, v in doc["overall"].items():
        lines.append(f"| {key.replace('_', ' ')} | {_pct(v[la])} | {_pct(v[lb])} | {100 * v['delta']:+.1f} pt |")
    lines += ["", f"| design | golden {la} | golden {lb} | detect {la} | detect {lb} |", "|---|---:|---:|---:|---:|"]
    for name, v in doc["designs"].items():
        g, d = v["golden_pass_rate"], v["detection_rate"]
        lines.append(f"| {name} | {_pct(g[la])} | {_pct(g[lb])} | {_pct(d[la])} | {_pct(d[lb])} |")
    if doc["settings_differ"]:
        lines += [
            "",
            "Settings differ (the numbers are not comparable on these): "
            + "; ".join(f"{k}: {x!r} vs {y!r}" for k, (x, y) in doc["settings_differ"].items()),
        ]
    if doc["mutant_sets_differ"]:
        lines += ["", f"Mutant sets differ for: {', '.join(doc['mutant_sets_differ'])}"]
    for label, names in doc["only_in"].items():
        if names:
            lines += ["", f"Only in {label}: {', '.join(names)}"]
    return "\n".join(lines) + "\n"
