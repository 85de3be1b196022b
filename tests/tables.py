"""Reading a run store's tables directly, as an outside reader would (read-only SQLite)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hwtp.run.store import DB_NAME


def table(rundir: Path, sql: str) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` on the run store in ``rundir``, opened read-only."""
    conn = sqlite3.connect(f"file:{rundir / DB_NAME}?mode=ro", uri=True, timeout=30)
    try:
        return list(conn.execute(sql))
    finally:
        conn.close()
