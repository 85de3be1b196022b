"""The survivor baseline of ``hwtp ci``: accepted survivors, found again after unrelated edits.

``hwtp ci --write-baseline FILE`` lists today's survivors; ``--baseline FILE`` accepts them: the
gate fails only on survivors the baseline does not hold, and the report names baseline entries
now killed (the tests improved: drop them) and gone (their line changed, or the mutant was not in
this run).

A mutant's identity does not use its line number (edits above it move it). It is: the file, the
operator, the original and replacement text, the mutated line's text (whitespace collapsed), which
occurrence of the original text in that line is mutated, and which of the file's lines with that
same text it is (``ordinal``, counted from the top). The file is JSON, one entry per survivor,
with the line and diff of the run that wrote it for the reader.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwtp import yamlio
from hwtp.errors import ConfigError

if TYPE_CHECKING:  # mutation imports this module for identity()
    from hwtp.ci.mutation import CiReport, MutantResult

FORMAT = "hwtp-ci-baseline/1"
_FIELDS = ("file", "operator", "original", "replacement", "context", "occurrence", "ordinal")


def _collapse(text: str) -> str:
    return " ".join(text.split())


def identity(file: str, operator: str, original: str, replacement: str, lines: Sequence[str],
             line: int, col: int) -> str:
    """The stable identity of a mutant (see the module docstring), as a JSON array string.

    ``lines`` are the golden file's lines, ``line`` and ``col`` the 1-based position (``col`` in
    bytes) of the original text."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    context = _collapse(text)
    before = text.encode("utf-8")[: max(col - 1, 0)].decode("utf-8", errors="ignore")
    occurrence = before.count(original) if original else 0
    ordinal = sum(1 for earlier in lines[: max(line - 1, 0)] if _collapse(earlier) == context)
    return json.dumps([file, operator, original, replacement, context, occurrence, ordinal])


@dataclass(frozen=True)
class Entry:
    """One accepted survivor."""

    key: str
    id: str = ""        # informative: the mutant id, line and diff when the baseline was written
    line: int = 0
    diff: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {**dict(zip(_FIELDS, json.loads(self.key), strict=True)), "id": self.id, "line": self.line,
                "diff": self.diff}

    @property
    def where(self) -> str:
        fields = json.loads(self.key)
        return f"{fields[0]}:{self.line} {fields[1]} ({fields[4]})"


@dataclass(frozen=True)
class Check:
    """This run against a baseline."""

    path: str
    new: tuple[str, ...]           # ids of survivors not in the baseline: they fail the gate
    accepted: tuple[str, ...]      # ids of survivors the baseline holds
    now_killed: tuple[Entry, ...]  # baseline entries whose mutant is killed now
    gone: tuple[Entry, ...]        # baseline entries with no mutant of that identity in this run

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "new": list(self.new), "accepted": list(self.accepted),
                "now_killed": [e.as_dict() for e in self.now_killed], "gone": [e.as_dict() for e in self.gone]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Check:
        return cls(data["path"], tuple(data["new"]), tuple(data["accepted"]),
                   tuple(_entry(e) for e in data["now_killed"]), tuple(_entry(e) for e in data["gone"]))


def _entry(row: dict[str, Any]) -> Entry:
    key = json.dumps([row[f] for f in _FIELDS])
    return Entry(key, str(row.get("id", "")), int(row.get("line", 0)), str(row.get("diff", "")))


def render(survivors: Iterable[MutantResult]) -> str:
    entries = [Entry(m.key, m.id, m.line, m.diff).as_dict() for m in survivors]
    return json.dumps({"format": FORMAT, "survivors": entries}, indent=2) + "\n"


def load(path: Path) -> tuple[Entry, ...]:
    """The entries of a baseline file; a clear error when it is not one."""
    text = yamlio.read_text(path, ConfigError)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not JSON ({exc.msg}); write it with hwtp ci --write-baseline") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("survivors"), list):
        raise ConfigError(f"--baseline {path}: not an hwtp ci baseline (expected format {FORMAT!r})")
    try:
        return tuple(_entry(row) for row in data["survivors"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"--baseline {path}: an entry lacks a field ({exc})") from exc


def check(report: CiReport, entries: Sequence[Entry], path: str) -> Check:
    """Compare this run's survivors and kills with the baseline's entries."""
    accepted_keys = {e.key for e in entries}
    survivors = report.survivors
    by_key = {m.key: m for m in report.mutants}
    killed = {m.key for m in report.mutants if m.status.value == "killed"}
    return Check(
        path=path,
        new=tuple(m.id for m in survivors if m.key not in accepted_keys),
        accepted=tuple(m.id for m in survivors if m.key in accepted_keys),
        now_killed=tuple(e for e in entries if e.key in killed),
        gone=tuple(e for e in entries if e.key not in by_key),
    )
