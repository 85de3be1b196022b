"""Plan inputs for scoring: files, folders, stdin, and folders written by ``hwtp plan``.

A plan that cannot be read or parsed is kept with its reason (it scores as ``invalid``); it
never stops the others. Plans from ``hwtp plan`` know the state they were written for
(``state``); plain plan files do not (``state`` is None) and are scored on every state.

The records of ``plans.jsonl`` (:class:`PlanRecord`) are defined here, with their one
reader (:meth:`PlanRecord.from_json`, :func:`read_index`), used by scoring, replay, export
and the run store alike.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwtp import yamlio
from hwtp.errors import HwtpError, PlanError, ScoreError
from hwtp.plans.format import Plan, extract_plan, load_plan_file, plan_from_data

if TYPE_CHECKING:
    from hwtp.sim.job import CompiledTests

#: Index file that ``hwtp plan`` writes in its output folder.
PLAN_INDEX = "plans.jsonl"
_PLAN_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Generated:
    """One sample: the completion exactly as produced, and its metadata.

    ``unavailable``: the policy never produced this sample (its endpoint failed after the
    retries; ``error`` says why). It is not a sample: it gets no plan record, so it is never
    scored or exported, and a rerun asks for it again.
    """

    index: int
    text: str | None
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    latency_s: float = 0.0
    model: str = ""
    from_cache: bool = False
    error: str | None = None
    unavailable: bool = False


def plan_id(state: str, sample: int) -> str:
    """The id ``hwtp plan`` gives sample ``sample`` of ``state`` (``golden-s00``, ``m0001-s02``)."""
    return f"{state}-s{sample:02d}"


@dataclass(frozen=True)
class PlanRecord:
    """One line of plans.jsonl. A sample is identified by (design, mutant set, state, plan):
    plan ids (``golden-s00``, ``m0001-s02``) repeat in every design and are never a key alone."""

    plan: str
    state: str
    sample: int
    policy: str
    parameters: dict[str, Any]
    prompt: list[dict[str, str]]
    generated: Generated
    error: str | None
    design: str = ""
    mutant_set: str = ""

    @property
    def completion(self) -> str | None:
        return self.generated.text

    def as_json(self) -> dict[str, Any]:
        g = self.generated
        return {
            "design": self.design,
            "mutant_set": self.mutant_set,
            "plan": self.plan,
            "state": self.state,
            "sample": self.sample,
            "policy": self.policy,
            "model": g.model,
            "parameters": self.parameters,
            "prompt": self.prompt,
            "completion": g.text,
            "finish_reason": g.finish_reason,
            "usage": g.usage,
            "latency_s": round(g.latency_s, 4),
            "from_cache": g.from_cache,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: Any) -> PlanRecord:
        """The record of one plans.jsonl line (parsed JSON); ``as_json`` gives it back.
        Raises ``ValueError``/``KeyError``/``TypeError`` on a record without a state. A record
        without ``sample`` is sample 0 and one without ``plan`` gets hwtp plan's id
        (``STATE-sNN``), so hand-written replay records of ``state``, ``sample`` and
        ``completion`` are enough. ``design`` and ``mutant_set`` are empty in records of an
        older hwtp."""
        if not isinstance(data, dict):
            raise TypeError(f"a plan record is a JSON object, not {type(data).__name__}")
        sample = int(data.get("sample", 0))
        completion = data.get("completion")
        generated = Generated(
            sample,
            completion if isinstance(completion, str) else None,
            data.get("finish_reason"),
            data.get("usage"),
            float(data.get("latency_s") or 0.0),
            str(data.get("model") or ""),
            bool(data.get("from_cache", False)),
        )
        state = str(data["state"])
        return cls(
            plan=str(data.get("plan") or plan_id(state, sample)),
            state=state,
            sample=sample,
            policy=str(data.get("policy") or ""),
            parameters=dict(data.get("parameters") or {}),
            prompt=list(data.get("prompt") or []),
            generated=generated,
            error=data.get("error"),
            design=str(data.get("design") or ""),
            mutant_set=str(data.get("mutant_set") or ""),
        )


def read_index(index: Path, error: type[HwtpError] = ScoreError) -> list[tuple[int, PlanRecord]]:
    """Every record of a plans.jsonl with its line number; a file that cannot be read or a
    malformed line raises ``error`` located at ``index:line``."""
    text = yamlio.read_text(index, error)
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((lineno, PlanRecord.from_json(json.loads(line))))
        except (ValueError, KeyError, TypeError) as exc:
            raise error(f"{index}:{lineno}: malformed record: {exc}") from exc
    return out


@dataclass(frozen=True)
class PlanInput:
    """One plan to score: parsed, or the reason it is invalid."""

    id: str
    plan: Plan | None
    error: str | None = None
    state: str | None = None  # the state it was written for (hwtp plan), else None
    source: str = ""
    meta: dict[str, Any] | None = None  # hwtp plan's metadata (prompt, completion, usage...)
    # the compiled tests and cycles when already checked against the design and cycle limit it is
    # scored with (hwtp.plans.fastread.Reader, the reward path); hwtp.scoring.score.prepare then takes them as they are
    compiled: tuple[CompiledTests, int] | None = field(default=None, compare=False, repr=False)


def _from_file(path: Path, plan_id: str) -> PlanInput:
    try:
        return PlanInput(plan_id, load_plan_file(path), source=str(path))
    except PlanError as exc:
        return PlanInput(plan_id, None, str(exc), source=str(path))


def _from_index(folder: Path) -> list[PlanInput]:
    index = folder / PLAN_INDEX
    return [plan_input(record, f"{index}:{lineno}") for lineno, record in read_index(index)]


def plan_input(record: PlanRecord, source: str = "") -> PlanInput:
    """The plan of a plans.jsonl record to score, or the reason it is invalid."""
    if record.completion is None:
        return PlanInput(record.plan, None, record.error or "no completion", record.state, source, record.as_json())
    try:
        plan = extract_plan(record.completion, source=record.plan)
    except PlanError as exc:
        return PlanInput(record.plan, None, str(exc), record.state, source, record.as_json())
    return PlanInput(record.plan, plan, None, record.state, source, record.as_json())


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
