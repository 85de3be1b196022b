"""Where reward functions find mutant sets: the folders of ``HWTP_STATES`` or ``configure(states=...)``.

A folder is a run folder (``RUNDIR/designs/*/mutants``), an ``hwtp mutate`` output folder
(``mutants.json`` in it), or a folder of such output folders. Sets are indexed by (design,
set hash) and loaded lazily, on the first request that names them; a cached set is reloaded
when its ``mutants.json`` changes on disk, and a request whose set is not found rescans.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

from hwtp.errors import HwtpError, RewardError
from hwtp.mutators.mutantset import MUTANTS_JSON, MutantSet, load


@dataclass(frozen=True)
class _Entry:
    stamp: tuple[int, int]  # (mtime_ns, size) of mutants.json when loaded
    mutant_set: MutantSet
    hash: str


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def candidates(folder: Path) -> list[Path]:
    """Mutant folders under ``folder``: itself, ``designs/*/mutants`` (a run), ``*`` and ``*/mutants``."""
    if (folder / MUTANTS_JSON).is_file():
        return [folder]
    found = [p.parent for p in sorted(folder.glob(f"designs/*/mutants/{MUTANTS_JSON}"))]
    found += [p.parent for p in sorted(folder.glob(f"*/{MUTANTS_JSON}"))]
    found += [p.parent for p in sorted(folder.glob(f"*/mutants/{MUTANTS_JSON}"))]
    return list(dict.fromkeys(found))


def _design_of(mutdir: Path) -> str | None:
    """The design name in ``mutants.json``, read without loading the set."""
    try:
        data = json.loads((mutdir / MUTANTS_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = data.get("design") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


class Registry:
    """Mutant sets of some folders, by (design, set hash). Thread-safe."""

    def __init__(self, folders: tuple[Path, ...]) -> None:
        self.folders = folders
        self._lock = threading.Lock()
        self._loaded: dict[Path, _Entry] = {}
        self._by_key: dict[tuple[str, str], Path] = {}

    def _load(self, mutdir: Path) -> _Entry:
        stamp = _stamp(mutdir / MUTANTS_JSON)
        entry = self._loaded.get(mutdir)
        if entry is not None and entry.stamp == stamp:
            return entry
        mutant_set = load(mutdir)
        entry = _Entry(stamp or (0, 0), mutant_set, mutant_set.set_hash)
        self._loaded[mutdir] = entry
        self._by_key[(mutant_set.design.name, entry.hash)] = mutdir
        return entry

    def find(self, design: str, hash_: str) -> MutantSet:
        """The mutant set of ``design`` whose hash is ``hash_``; :class:`RewardError` when none is."""
        with self._lock:
            known = self._by_key.get((design, hash_))
            if known is not None:
                try:
                    entry = self._load(known)
                except HwtpError:
                    entry = None
                if entry is not None and entry.hash == hash_:
                    return entry.mutant_set
                self._by_key.pop((design, hash_), None)
            seen: list[str] = []
            problems: list[str] = []
            for folder in self.folders:
                if not folder.is_dir():
                    problems.append(f"{folder} does not exist")
                    continue
                for mutdir in candidates(folder):
                    if _design_of(mutdir) != design:
                        continue
                    try:
                        entry = self._load(mutdir)
                    except HwtpError as exc:
                        problems.append(str(exc))
                        continue
                    if entry.hash == hash_:
                        return entry.mutant_set
                    seen.append(f"{entry.hash[:12]} in {mutdir}")
            raise RewardError(self._not_found(design, hash_, seen, problems))

    def _not_found(self, design: str, hash_: str, seen: list[str], problems: list[str]) -> str:
        if not self.folders:
            return (
                f"mutant set {hash_[:12]} of design {design!r}: no folders to search; set HWTP_STATES to the "
                "run folders (or hwtp mutate output folders) the export came from, "
                "or call hwtp.rewards.configure(states=...)"
            )
        where = ", ".join(str(f) for f in self.folders)
        text = f"mutant set {hash_[:12]} of design {design!r} not found in {where}"
        if seen:
            text += (
                f"; that design has mutant set {'; '.join(seen)} there: the mutant set changed since the export "
                "(export again, or point HWTP_STATES at the folder that made this export)"
            )
        if problems:
            text += f" ({'; '.join(problems[:3])})"
        return text
