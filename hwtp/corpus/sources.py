"""Candidates of ``hwtp designs import``: RTL paired with a spec by patterns or a manifest.

Each SRC is one of:

* a folder. With RTL patterns that hold ``{name}`` (``{name}_ref.sv``), every matching file
  below it is one design named by what ``{name}`` matched, and its spec is the file in the
  same folder matching a spec pattern with that name (``{name}_prompt.txt``). Otherwise (the
  default ``*.v``/``*.sv``) a folder with RTL directly in it is one design, else each of its
  sub-folders that has RTL somewhere below is one design (its name the folder's), with every
  RTL file below it and the first spec file found (patterns in order, shallowest first).
* a manifest, ``.csv`` (a header row) or ``.jsonl`` (one object a line): one design a row
  with ``rtl`` (paths, ``;``-separated in CSV), and optionally ``name``, ``spec`` (a path),
  ``spec_text``, ``top``, ``clock`` (a port, ``none``, or in JSONL ``{port, period_ns}``),
  ``period_ns``, ``reset`` (a port, ``none``, or ``{port, active, cycles}``),
  ``reset_active``, ``reset_cycles``. Paths are relative to the manifest.
* one RTL file: one design named after it.

Files matching an exclude pattern (testbenches by default) are never RTL of a design.
"""

from __future__ import annotations

import csv
import fnmatch
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwtp.errors import ConfigError

DEFAULT_RTL = ("*.v", "*.sv")
DEFAULT_SPEC = ("spec.md", "SPEC.md", "spec.txt", "README.md", "*.md", "*.txt")
DEFAULT_EXCLUDE = ("tb_*", "*_tb.*", "test_*", "*_test.*", "*_tb_*", "tb.*", "testbench*", "*_testbench*")
_MANIFEST_FIELDS = {
    "name",
    "rtl",
    "spec",
    "spec_text",
    "top",
    "clock",
    "period_ns",
    "reset",
    "reset_active",
    "reset_cycles",
}


@dataclass(frozen=True)
class Candidate:
    """One design to import: where it came from, its RTL and spec, and its overrides
    (``clock``/``reset``: None to guess, ``"none"`` for none, else ``hwtp.rtl.design.clock_from``'s
    and ``reset_from``'s mapping)."""

    name: str
    origin: str
    rtl: tuple[Path, ...]
    spec: Path | None = None
    spec_text: str | None = None
    top: str | None = None
    clock: dict[str, Any] | str | None = None
    reset: dict[str, Any] | str | None = None
    problem: str | None = None  # a row that cannot be used as given (the design is rejected with it)
    excluded: tuple[Path, ...] = ()  # RTL files in its folder left out as testbenches (``Patterns.exclude``)


@dataclass(frozen=True)
class Patterns:
    rtl: tuple[str, ...] = DEFAULT_RTL
    spec: tuple[str, ...] = DEFAULT_SPEC
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE

    def is_rtl(self, path: Path) -> bool:
        name = path.name
        return any(fnmatch.fnmatch(name, p) for p in self.rtl) and not self.excluded(path)

    def excluded(self, path: Path) -> bool:
        """Whether ``path`` is a testbench (or else left out by ``--exclude``), in any case."""
        return any(fnmatch.fnmatch(path.name.lower(), p.lower()) for p in self.exclude)

    @property
    def by_name(self) -> bool:
        return any("{name}" in p for p in self.rtl)


def _name_regex(pattern: str) -> re.Pattern[str]:
    head, _, tail = pattern.partition("{name}")
    glob = fnmatch.translate(head).removesuffix(r"\Z") if head else ""
    glob_tail = fnmatch.translate(tail).removesuffix(r"\Z")
    # fnmatch.translate wraps in (?s:...); strip the wrapper of each piece to splice them
    return re.compile(f"{_inner(glob)}(?P<name>.+?){_inner(glob_tail)}\\Z", re.DOTALL)


def _inner(translated: str) -> str:
    if translated.startswith("(?s:") and translated.endswith(")"):
        return translated[4:-1]
    return translated


def discover(sources: Sequence[Path], patterns: Patterns) -> list[Candidate]:
    """Every candidate of every SRC, in a stable order (SRC order, then path order)."""
    out: list[Candidate] = []
    for src in sources:
        if not src.exists():
            raise ConfigError(f"{src}: no such file or folder")
        if src.is_file() and src.suffix.lower() in (".csv", ".jsonl"):
            out.extend(read_manifest(src))
        elif src.is_file():
            out.append(Candidate(src.stem, str(src), (src,), _spec_beside(src, src.stem, patterns)))
        elif patterns.by_name:
            out.extend(_by_name(src, patterns))
        else:
            out.extend(_by_folder(src, patterns))
    return out


def _rtl_files(folder: Path, patterns: Patterns, recursive: bool) -> list[Path]:
    found = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(p for p in found if p.is_file() and patterns.is_rtl(p) and not _hidden(p, folder))


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _by_folder(src: Path, patterns: Patterns) -> list[Candidate]:
    if _rtl_files(src, patterns, recursive=False):
        return [_folder_candidate(src, patterns)]
    subfolders = sorted(p for p in src.iterdir() if p.is_dir() and not p.name.startswith("."))
    return [_folder_candidate(d, patterns) for d in subfolders if _rtl_files(d, patterns, recursive=True)]


def _folder_candidate(folder: Path, patterns: Patterns) -> Candidate:
    rtl = tuple(_rtl_files(folder, patterns, recursive=True))
    spec = None
    files = sorted(
        (p for p in folder.rglob("*") if p.is_file() and not _hidden(p, folder) and p not in rtl),
        key=lambda p: (len(p.relative_to(folder).parts), str(p)),
    )
    for pattern in patterns.spec:
        spec = next((p for p in files if fnmatch.fnmatch(p.name, pattern) and not patterns.excluded(p)), None)
        if spec is not None:
            break
    suffixes = {Path(p).suffix for p in patterns.rtl}
    excluded = tuple(
        sorted(
            p
            for p in folder.rglob("*")
            if p.is_file() and p.suffix in suffixes and patterns.excluded(p) and not _hidden(p, folder)
        )
    )
    return Candidate(folder.name, str(folder), rtl, spec, excluded=excluded)


def _by_name(src: Path, patterns: Patterns) -> list[Candidate]:
    regexes = [_name_regex(p) for p in patterns.rtl if "{name}" in p]
    out = []
    for path in sorted(p for p in src.rglob("*") if p.is_file() and not _hidden(p, src)):
        if patterns.excluded(path):
            continue
        match = next((m for r in regexes if (m := r.match(path.name))), None)
        if match is not None:
            name = match.group("name")
            out.append(Candidate(name, str(path), (path,), _spec_beside(path, name, patterns)))
    return out


def _spec_beside(path: Path, name: str, patterns: Patterns) -> Path | None:
    for pattern in patterns.spec:
        if "{name}" in pattern:
            candidate = path.parent / pattern.replace("{name}", name)
            if candidate.is_file():
                return candidate
    for suffix in (".md", ".txt"):
        candidate = path.with_suffix(suffix)
        if candidate.is_file():
            return candidate
    return None


def read_manifest(path: Path) -> list[Candidate]:
    """The candidates of a CSV or JSONL manifest; a malformed file is a :class:`ConfigError`,
    a row that cannot be used is a candidate with its ``problem``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the manifest: {exc}") from exc
    rows: list[tuple[int, dict[str, Any]]] = []
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        unknown = sorted(set(reader.fieldnames or ()) - _MANIFEST_FIELDS)
        if unknown or "rtl" not in (reader.fieldnames or ()):
            raise ConfigError(
                f"{path}:1: {'unknown column ' + repr(unknown[0]) if unknown else 'no rtl column'} "
                f"(columns: {', '.join(sorted(_MANIFEST_FIELDS))})"
            )
        for row in reader:
            rows.append((reader.line_num, {k: v for k, v in row.items() if v not in (None, "")}))
    else:
        for line_no, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ConfigError(f"{path}:{line_no}: not JSON: {exc}") from exc
            if not isinstance(row, dict):
                raise ConfigError(f"{path}:{line_no}: expected an object")
            unknown = sorted(set(row) - _MANIFEST_FIELDS)
            if unknown:
                raise ConfigError(
                    f"{path}:{line_no}: {unknown[0]}: unknown field ({', '.join(sorted(_MANIFEST_FIELDS))})"
                )
            rows.append((line_no, {k: v for k, v in row.items() if v not in (None, "")}))
    return [_row_candidate(path, line_no, row) for line_no, row in rows]


def _row_candidate(path: Path, line_no: int, row: dict[str, Any]) -> Candidate:
    origin = f"{path}:{line_no}"
    base = path.parent
    rtl_field = row.get("rtl")
    rtl_list = rtl_field.split(";") if isinstance(rtl_field, str) else rtl_field
    if not isinstance(rtl_list, list) or not rtl_list or not all(isinstance(r, str) and r.strip() for r in rtl_list):
        return Candidate(str(row.get("name") or f"row{line_no}"), origin, (), problem="rtl: expected one or more paths")
    rtl = tuple(base / r.strip() for r in rtl_list)
    name = str(row.get("name") or rtl[0].stem)
    spec = base / row["spec"] if isinstance(row.get("spec"), str) else None
    spec_text = row.get("spec_text") if isinstance(row.get("spec_text"), str) else None
    clock: Any = row.get("clock")
    if isinstance(clock, str) and clock != "none":
        clock = {"port": clock} | ({"period_ns": _number(row["period_ns"])} if "period_ns" in row else {})
    reset: Any = row.get("reset")
    if isinstance(reset, str) and reset != "none":
        reset = {"port": reset}
        if "reset_active" in row:
            reset["active"] = row["reset_active"]
        if "reset_cycles" in row:
            reset["cycles"] = _number(row["reset_cycles"], int)
    top = row.get("top")
    return Candidate(name, origin, rtl, spec, spec_text, str(top) if top is not None else None, clock, reset)


def _number(value: Any, kind: type[float] | type[int] = float) -> Any:
    """A CSV cell as a number, or as given when it is not one (the record refuses it in its words)."""
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            return value
    return value
