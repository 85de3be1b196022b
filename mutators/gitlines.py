"""Lines changed since a git revision (``--since GITREV``), read with ``git diff -U0``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from hwtp.errors import MutantError

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def changed_lines(path: Path, rev: str) -> set[int]:
    """1-based line numbers of ``path`` added or changed since ``rev``."""
    folder = path.resolve().parent
    if rev.startswith("-"):
        raise MutantError(f"--since {rev!r}: not a git revision")
    argv = ["git", "-C", str(folder), "diff", "-U0", "--no-color", rev, "--", path.name]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    except OSError as exc:
        raise MutantError(f"--since needs git: {exc.strerror}") from exc
    if out.returncode != 0:
        reason = (out.stderr.strip().splitlines() or ["git diff failed"])[0]
        raise MutantError(f"--since {rev}: {path}: {reason}")
    lines: set[int] = set()
    for match in _HUNK.finditer(out.stdout):
        start, count = int(match.group(1)), int(match.group(2) or 1)
        lines.update(range(start, start + count))
    return lines
