"""What ``hwtp report`` shows, gathered from its sources into plain records.

A source is a run folder (read through :mod:`hwtp.run.store` and the mutant sets beside it), a
scores JSON written by ``hwtp score --json`` (one document or a list), or a ``hwtp ci --json``
report. Every number is computed by the module that owns it: golden pass and detection rates
by :mod:`hwtp.scoring.score`, advantages and zero-advantage shares by :mod:`hwtp.training.advantage`;
this module only counts and sorts. What a source does not hold is ``None`` (the page says
"not recorded").
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hwtp.errors import ConfigError
from hwtp.mutators import mutantset
from hwtp.mutators.base import family_of
from hwtp.mutators.mutantset import GOLDEN
from hwtp.run import loop
from hwtp.run.store import DB_NAME, open_store
from hwtp.scoring.score import Outcome, SampleResult, rates
from hwtp.training.advantage import AdvantageConfig, advantage_records, preset, summarize

#: The order outcomes are listed and coloured in (the kill matrix's legend).
OUTCOME_ORDER = tuple(o.value for o in Outcome)
SLOWEST = 10
EXCERPT = 600
_SAMPLE_SUFFIX = re.compile(r"-(s\d+)$")


@dataclass
class DesignView:
    """One design of a run or scores file."""

    name: str
    samples: int
    golden_pass_rate: float
    detection_rate: float
    mean_reward: float
    rewards: dict[float, int]  # reward value -> samples
    matrix_rows: list[str]  # plans (or sample ids when every plan has one state)
    matrix_cols: list[str]  # states, golden first
    matrix: dict[tuple[str, str], str]  # (row, col) -> outcome
    zero_share: dict[str, float]  # grouping -> share of groups whose advantages are all 0
    advantages: dict[str, list[float]]  # grouping -> advantages


@dataclass
class MutantRow:
    design: str
    id: str
    family: str
    operator: str
    klass: str
    status: str
    location: str


@dataclass
class LlmView:
    """The policy's side of a run: tokens, latency, cache, finish reasons, invalid plans."""

    policy: str
    model: str | None
    records: int
    prompt_tokens: int | None
    completion_tokens: int | None
    latency: dict[str, float] | None  # percentile name -> seconds (requests that were not cached)
    cached: int
    finish_reasons: dict[str, int]


@dataclass
class InvalidPlan:
    design: str
    plan: str
    reason: str
    completion: str  # an excerpt: text from the LLM, rendered escaped


@dataclass
class RunView:
    """A run folder or scores file: per design and overall."""

    label: str
    kind: str  # "run" or "scores"
    designs: list[DesignView]
    overall: DesignView
    config: dict[str, Any]
    mutants: list[MutantRow] | None = None
    slowest: list[dict[str, Any]] | None = None
    llm: LlmView | None = None
    invalid: list[InvalidPlan] = field(default_factory=list)
    invalid_reasons: dict[str, int] = field(default_factory=dict)


@dataclass
class SourceLine:
    number: int
    text: str
    killed: int
    survived: int
    other: int


@dataclass
class CiView:
    """A ``hwtp ci`` JSON report, with the sources it names when they can be read."""

    label: str
    design: str
    score: float | None
    min_score: float | None
    gate_passed: bool
    formula: str
    counts: dict[str, int]
    survivors: dict[str, list[dict[str, Any]]]  # file -> survivors
    stages: list[str]  # the survivors' columns present: activated, propagated, detected, diagnosis
    killed_by_test: dict[str, int]
    golden_tests: list[str]
    sources: dict[str, list[SourceLine] | None]  # file -> lines (None: not found)
    indeterminate: list[dict[str, Any]]


@dataclass
class LearnView:
    """An ``hwtp learn`` folder: its results.json and the rows of its before/after table."""

    label: str
    results: dict[str, Any]
    rows: list[dict[str, str]]
    note: str


#: The file an ``hwtp learn`` folder is recognised by.
LEARN_RESULTS = "results.json"


def learn_view(folder: Path) -> LearnView:
    """The view of an ``hwtp learn -o FOLDER``."""
    from hwtp.training.learn.report import rows, table

    path = folder / LEARN_RESULTS
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a JSON file: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("kind") != "hwtp-learn" or not isinstance(doc.get("runs"), list):
        raise ConfigError(f"{path}: not an hwtp learn results.json (kind 'hwtp-learn' with runs)")
    note = table(doc).rsplit("\n", 1)[-1] if doc["runs"] else "No seed finished."
    return LearnView(str(folder), doc, rows(doc), note)


View = RunView | CiView | LearnView


def load_source(path: Path, root: Path | None = None) -> View:
    """A run folder, a scores JSON or a ``hwtp ci`` JSON report; ``root`` is where the ci
    report's source files are looked up (default: the current folder, then the report's)."""
    if path.is_dir():
        if (path / LEARN_RESULTS).is_file() and not (path / DB_NAME).is_file():
            return learn_view(path)
        if not (path / DB_NAME).is_file():
            raise ConfigError(f"{path}: not a run folder (no {DB_NAME}) nor an hwtp learn folder (no {LEARN_RESULTS})")
        return run_view(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file or folder") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a JSON file: {exc}") from exc
    if isinstance(doc, dict) and "mutants" in doc and "counts" in doc:
        return ci_view(doc, str(path), [root] if root else [Path.cwd(), path.parent])
    if (isinstance(doc, dict) and "results" in doc) or isinstance(doc, list):
        docs = doc if isinstance(doc, list) else [doc]
        return scores_view(docs, str(path), preset("grpo-smu"), {"preset": "grpo-smu", "group_by": "design"})
    raise ConfigError(f"{path}: neither a scores JSON (hwtp score --json) nor a hwtp ci JSON report")


# ---------------------------------------------------------------------------- runs and scores


def _samples(results: list[dict[str, Any]]) -> list[SampleResult]:
    return [
        SampleResult(r["plan"], r["state"], Outcome(r["outcome"]), float(r["reward"]), r.get("detail"))
        for r in results
    ]


def _matrix(results: list[dict[str, Any]]) -> tuple[list[str], list[str], dict[tuple[str, str], str]]:
    """Plans x states; when every plan was scored on one state only (a run), rows are the
    sample ids (``s00``...) so the matrix is samples x states instead of a diagonal."""
    per_plan: dict[str, set[str]] = defaultdict(set)
    for r in results:
        per_plan[r["plan"]].add(r["state"])
    single = all(len(s) == 1 for s in per_plan.values()) and all(_SAMPLE_SUFFIX.search(p) for p in per_plan)

    def row(plan: str) -> str:
        found = _SAMPLE_SUFFIX.search(plan)
        return found.group(1) if single and found else plan

    cells = {(row(r["plan"]), r["state"]): r["outcome"] for r in results}
    rows = sorted({k[0] for k in cells})
    cols = sorted({k[1] for k in cells}, key=lambda s: (s != GOLDEN, s))
    return rows, cols, cells


def _design_view(name: str, docs: list[dict[str, Any]], config: AdvantageConfig) -> DesignView:
    results = [r for d in docs for r in d["results"]]
    by_design: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in docs:
        by_design[d["design"]].extend(d["results"])
    samples = [_samples(rs) for rs in by_design.values()]
    golden, detect = rates(samples)  # plan ids repeat in every design: counted per design
    rows, cols, cells = _matrix(results) if len(docs) == 1 else ([], [], {})
    shares: dict[str, float] = {}
    advantages: dict[str, list[float]] = {}
    if results:
        shares = {k: v.share for k, v in summarize(docs, config).items()}
        for by in ("state", "design"):
            records = advantage_records(docs, config, by=by)  # type: ignore[arg-type]
            advantages[by] = [float(r["advantage"]) for r in records]
    return DesignView(
        name=name,
        samples=len(results),
        golden_pass_rate=golden,
        detection_rate=detect,
        mean_reward=float(np.mean([r["reward"] for r in results])) if results else 0.0,
        rewards=dict(sorted(Counter(float(r["reward"]) for r in results).items())),
        matrix_rows=rows,
        matrix_cols=cols,
        matrix=cells,
        zero_share=shares,
        advantages=advantages,
    )


def scores_view(docs: list[dict[str, Any]], label: str, config: AdvantageConfig, settings: dict[str, Any]) -> RunView:
    """Per design and overall numbers of score documents (``hwtp score --json`` shape)."""
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or not isinstance(doc.get("results"), list) or "design" not in doc:
            raise ConfigError(f"{label}: document {i} is not a scores JSON (needs 'design' and 'results')")
    designs = [_design_view(d["design"], [d], config) for d in docs]
    overall = _design_view("overall", [d for d in docs if d["results"]], config)
    return RunView(label=label, kind="scores", designs=designs, overall=overall, config=settings)


def _percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    p50, p90, p99 = np.percentile(values, [50, 90, 99]).tolist()
    return {"p50": p50, "p90": p90, "p99": p99, "max": max(values)}


def _llm(policy: str, records: list[dict[str, Any]]) -> LlmView:
    usages = [r["usage"] for r in records if isinstance(r.get("usage"), dict)]
    live = [float(r["latency_s"]) for r in records if not r.get("from_cache") and r.get("latency_s")]
    models = sorted({str(r["model"]) for r in records if r.get("model")})
    return LlmView(
        policy=policy,
        model=", ".join(models) or None,
        records=len(records),
        prompt_tokens=sum(int(u.get("prompt_tokens") or 0) for u in usages) if usages else None,
        completion_tokens=sum(int(u.get("completion_tokens") or 0) for u in usages) if usages else None,
        latency=_percentiles(live),
        cached=sum(1 for r in records if r.get("from_cache")),
        finish_reasons=dict(Counter(str(r.get("finish_reason")) for r in records if r.get("finish_reason"))),
    )


def _value(member: object) -> str:
    """An enum member's value (or a plain string) as text."""
    return str(getattr(member, "value", member))


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "(no reason given)"


def run_view(rundir: Path) -> RunView:
    """Everything the report shows about a run folder, read without its lock (beside a run)."""
    status = loop.status(rundir)
    with open_store(rundir, readonly=True) as store:
        settings = dict(store.get_meta("config") or {})
        names = [n for n in status["stages"] if store.samples(n)]
        docs = loop.score_docs(store, names)
        view = scores_view(docs, str(rundir), preset(settings.get("preset", "grpo-smu")), settings)
        view.kind = "run"
        mutants: list[MutantRow] = []
        slowest: list[dict[str, Any]] = []
        records: list[dict[str, Any]] = []
        for name in status["stages"]:
            row = store.design_row(name)
            mutdir = row.mutdir if row else None
            if mutdir and (rundir / mutdir / mutantset.MUTANTS_JSON).is_file():
                for m in mutantset.load(rundir / mutdir).mutants:
                    klass, state = _value(m.klass), _value(m.status)
                    location = f"{m.file}:{m.line}"
                    mutants.append(MutantRow(name, m.id, family_of(m.operator), m.operator, klass, state, location))
            for key, result in store.evaluations(name).items():
                slowest.append({"design": name, "id": key, "status": _value(result.status), "seconds": result.seconds})
            for plan in store.plans(name):
                record = plan.record.as_json()
                records.append(record)
                if record.get("error"):
                    view.invalid.append(
                        InvalidPlan(name, plan.plan, _first_line(str(record["error"])).removeprefix(f"{plan.plan}: "),
                                    str(record.get("completion") or "")[:EXCERPT])
                    )
    view.mutants = mutants or None
    view.slowest = sorted(slowest, key=lambda e: -e["seconds"])[:SLOWEST]
    view.llm = _llm(str(settings.get("policy", "")), records)
    view.invalid_reasons = dict(Counter(p.reason for p in view.invalid).most_common())
    return view


# ---------------------------------------------------------------------------- hwtp ci

_STAGES = ("activated", "propagated", "detected")


def _source(file: str, roots: list[Path], mutants: list[dict[str, Any]]) -> list[SourceLine] | None:
    for root in roots:
        path = root / file
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            break
    else:
        return None
    per_line: dict[int, Counter[str]] = defaultdict(Counter)
    for m in mutants:
        per_line[int(m["line"])][str(m["status"])] += 1
    return [
        SourceLine(
            n,
            line,
            per_line[n]["killed"],
            per_line[n]["survived"],
            sum(v for k, v in per_line[n].items() if k not in ("killed", "survived")),
        )
        for n, line in enumerate(text.splitlines(), start=1)
    ]


def _yes_no(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _stage_cells(m: dict[str, Any]) -> dict[str, str]:
    """A survivor's activated / propagated / detected cells (first time, test and output where known)
    and its diagnosis sentence (reports of an older hwtp ci have none of them)."""
    cells = {stage: _yes_no(m[stage]) for stage in _STAGES if stage in m}
    first = m.get("first_activation")
    if cells.get("activated") == "yes" and first:
        cells["activated"] = f"yes, at {first['time_ns']:g} ns of {first['test']}"
    first = m.get("first_propagation")
    if cells.get("propagated") == "yes" and first:
        cells["propagated"] = f"yes, {first['signal']} at {first['time_ns']:g} ns of {first['test']}"
    if m.get("why"):
        cells["diagnosis"] = str(m["why"])
    return cells


def ci_view(doc: dict[str, Any], label: str, roots: list[Path]) -> CiView:
    """The score and gate, survivors by file, kills per test and a source view."""
    mutants = list(doc.get("mutants") or [])
    by_file: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in mutants:
        by_file[str(m.get("file", "?"))].append(m)
    survivors: dict[str, list[dict[str, Any]]] = {}
    for file, ms in sorted(by_file.items()):
        alive = sorted(({**m, "cells": _stage_cells(m)} for m in ms if m.get("status") == "survived"),
                       key=lambda m: (m["line"], m["id"]))
        if alive:
            survivors[file] = alive
    killed = Counter(t for m in mutants if m.get("status") == "killed" for t in m.get("killed_by") or ())
    return CiView(
        label=label,
        design=str(doc.get("design", "")),
        score=doc.get("score"),
        min_score=doc.get("min_score"),
        gate_passed=bool(doc.get("gate_passed", True)),
        formula=str(doc.get("formula", "")),
        counts=dict(doc.get("counts") or {}),
        survivors=survivors,
        stages=[s for s in (*_STAGES, "diagnosis") if any(s in m.get("cells", {}) for ms in survivors.values()
                                                         for m in ms)],
        killed_by_test=dict(killed.most_common()),
        golden_tests=list((doc.get("golden") or {}).get("tests") or []),
        sources={file: _source(file, roots, ms) for file, ms in sorted(by_file.items())},
        indeterminate=[m for m in mutants if m.get("status") in ("timeout", "error")],
    )
