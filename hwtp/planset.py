"""Plan inputs for scoring: files, folders, stdin, and folders written by ``hwtp plan``.

A plan that cannot be read or parsed is kept with its reason (it scores as ``invalid``); it
never stops the others. Plans from ``hwtp plan`` know the state they were written for
(``state``); plain plan files do not (``state`` is None) and are scored on every state.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwtp import yamlio
from hwtp.errors import PlanError, ScoreError
from hwtp.plan import Plan, extract_plan, load_plan_file, plan_from_data

#: Index file that ``hwtp plan`` writes in its output folder.
PLAN_INDEX = "plans.jsonl"
_PLAN_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class PlanInput:
    """One plan to score: parsed, or the reason it is invalid."""

    id: str
    plan: Plan | None
    error: str | None = None
    state: str | None = None  # the state it was written for (hwtp plan), else None
    source: str = ""
    meta: dict[str, Any] | None = None  # hwtp plan's metadata (prompt, completion, usage...)


def _from_file(path: Path, plan_id: str) -> PlanInput:
    try:
        return PlanInput(plan_id, load_plan_file(path), source=str(path))
    except PlanError as exc:
        return PlanInput(plan_id, None, str(exc), source=str(path))


def _from_index(folder: Path) -> list[PlanInput]:
    out = []
    index = folder / PLAN_INDEX
    text = yamlio.read_text(index, ScoreError)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            plan_id, state = str(record["plan"]), str(record["state"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ScoreError(f"{index}:{lineno}: malformed record: {exc}") from exc
        completion = record.get("completion")
        if isinstance(completion, str):
            try:
                plan: Plan | None = extract_plan(completion, source=f"{plan_id}")
                error = None
            except PlanError as exc:
                plan, error = None, str(exc)
        else:
            plan, error = None, record.get("error") or "no completion"
        out.append(PlanInput(plan_id, plan, error, state, f"{index}:{lineno}", record))
    return out


def _stdin(text: str) -> list[PlanInput]:
    try:
        located = yamlio.load(text)
    except yamlio.YamlLoadError as exc:
        return [PlanInput("stdin", None, f"<stdin>:{exc.line or 1}: not valid YAML/JSON: {exc.message}")]
    if isinstance(located.data, list):
        out = []
        for i, item in enumerate(located.data):
            sub = yamlio.Located(item, {k[1:]: v for k, v in located.lines.items() if k[:1] == (i,)})
            try:
                out.append(PlanInput(f"stdin{i}", plan_from_data(sub, f"<stdin>[{i}]")))
            except PlanError as exc:
                out.append(PlanInput(f"stdin{i}", None, str(exc)))
        return out
    try:
        return [PlanInput("stdin", extract_plan(text, "<stdin>"))]
    except PlanError as exc:
        return [PlanInput("stdin", None, str(exc))]


def read_plans(refs: list[str], stdin_text: str | None = None) -> list[PlanInput]:
    """Read every plan named by ``refs`` (files, folders, or ``-`` for ``stdin_text``)."""
    out: list[PlanInput] = []
    for ref in refs:
        if ref == "-":
            out.extend(_stdin(stdin_text or ""))
            continue
        path = Path(ref)
        if path.is_dir():
            if (path / PLAN_INDEX).is_file():
                out.extend(_from_index(path))
            else:
                files = sorted(p for p in path.rglob("*") if p.suffix in _PLAN_SUFFIXES and p.is_file())
                if not files:
                    raise ScoreError(f"{path}: folder holds no plan (*.yaml, *.yml, *.json)")
                out.extend(_from_file(p, p.stem) for p in files)
        elif path.is_file():
            out.append(_from_file(path, path.stem))
        else:
            raise ScoreError(f"{ref}: no such plan file or folder")
    return _unique_ids(out)


def _unique_ids(plans: list[PlanInput]) -> list[PlanInput]:
    seen: dict[str, int] = {}
    out = []
    for p in plans:
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", p.id) or "plan"
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(
            p
            if n == 0 and base == p.id
            else PlanInput(base if n == 0 else f"{base}.{n}", p.plan, p.error, p.state, p.source, p.meta)
        )
    return out
