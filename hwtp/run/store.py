"""The run store: one SQLite database per run folder, and the only module that speaks SQL.

WAL mode, parameterised queries only, a schema version with migrations, an application id
that tells a foreign database from ours, and an exclusive lock file so two ``hwtp run``
processes never share a folder. Every stage writes its output in transactions keyed by
natural keys (``INSERT OR IGNORE``/``REPLACE``), so rerunning a stage is idempotent.

Concurrency model: one process writes (the lock file), through one connection, and every
statement and transaction on that connection is serialised by one re-entrant lock. The
threads that watch simulators store results as they arrive, so they call in concurrently;
the lock makes each call one whole transaction that no other thread can interleave with
(``sqlite3`` connections shared between threads are not safe without it). Other processes
(``hwtp status``) read through :func:`open_store` with ``readonly=True``: a read-only
connection, no lock file, which WAL lets run beside the writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwtp.errors import StoreError
from hwtp.mutators.mutantset import GOLDEN
from hwtp.plans.files import PlanRecord
from hwtp.scoring.score import Outcome, SampleResult
from hwtp.sim.runner import EvalResult

DB_NAME = "run.db"
LOCK_NAME = "run.lock"
APPLICATION_ID = 0x48575450  # "HWTP"
SCHEMA_VERSION = 2

_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE stages (design TEXT NOT NULL, stage TEXT NOT NULL, finished REAL NOT NULL,
                     PRIMARY KEY (design, stage));
CREATE TABLE designs (name TEXT PRIMARY KEY, ref TEXT NOT NULL, hash TEXT NOT NULL,
                      mutdir TEXT, set_hash TEXT);
CREATE TABLE states (design TEXT NOT NULL, state TEXT NOT NULL, selector INTEGER NOT NULL,
                     PRIMARY KEY (design, state));
CREATE TABLE plans (design TEXT NOT NULL, state TEXT NOT NULL, sample INTEGER NOT NULL,
                    plan TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (design, state, sample));
CREATE TABLE evaluations (design TEXT NOT NULL, key TEXT NOT NULL, result TEXT NOT NULL,
                          PRIMARY KEY (design, key));
CREATE TABLE samples (design TEXT NOT NULL, plan TEXT NOT NULL, state TEXT NOT NULL,
                      outcome TEXT NOT NULL, reward REAL NOT NULL, detail TEXT,
                      PRIMARY KEY (design, plan, state));
CREATE TABLE advantages (design TEXT NOT NULL, plan TEXT NOT NULL, state TEXT NOT NULL,
                         grp TEXT NOT NULL, advantage REAL NOT NULL, PRIMARY KEY (design, plan, state));
CREATE TABLE exports (format TEXT PRIMARY KEY, manifest TEXT NOT NULL);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
# v2: each sample records its state's attainable maximum (the reward ceiling).
_SCHEMA_V2 = "ALTER TABLE samples ADD COLUMN ceiling REAL;"
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2}


@dataclass(frozen=True)
class DesignRow:
    """A design of the run and its mutant set (``mutdir`` relative to the run folder)."""

    name: str
    ref: str
    hash: str
    mutdir: str
    set_hash: str


@dataclass(frozen=True)
class StateRow:
    """A state of a design and its selector value in the schemata build (0: golden)."""

    state: str
    selector: int


@dataclass(frozen=True)
class PlanRow:
    """A stored plan: its plans.jsonl record, keyed by (design, state, sample)."""

    design: str
    state: str
    sample: int
    plan: str
    record: PlanRecord


@dataclass(frozen=True)
class AdvantageRow:
    """A sample's advantage and the group it was computed in."""

    design: str
    plan: str
    state: str
    group: str
    advantage: float


class Store:
    """An open run store. Use :func:`open_store` (a context manager holding the lock)."""

    def __init__(self, conn: sqlite3.Connection, root: Path, readonly: bool = False) -> None:
        self.conn = conn
        self.root = root
        self.readonly = readonly
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- plumbing
    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction, held under the store's lock (committed on success)."""
        if self.readonly:
            raise StoreError(f"{self.root / DB_NAME}: opened read-only")
        with self._lock:
            try:
                with self.conn:
                    yield self.conn
            except sqlite3.Error as exc:
                raise StoreError(f"{self.root / DB_NAME}: {exc}") from exc

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self.conn.execute(sql, args))
            except sqlite3.Error as exc:
                raise StoreError(f"{self.root / DB_NAME}: {exc}") from exc

    # ---------------------------------------------------------------- meta
    def get_meta(self, key: str) -> Any:
        rows = self._all("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: Any) -> None:
        with self.transaction() as c:
            c.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value, sort_keys=True))
            )

    def bump(self, name: str, by: int = 1) -> None:
        with self.transaction() as c:
            c.execute(
                "INSERT INTO counters (name, value) VALUES (?, ?) "
                "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                (name, by),
            )

    def counters(self) -> dict[str, int]:
        return {n: int(v) for n, v in self._all("SELECT name, value FROM counters ORDER BY name")}

    # ---------------------------------------------------------------- stages
    def stage_done(self, design: str, stage: str) -> bool:
        return bool(self._all("SELECT 1 FROM stages WHERE design = ? AND stage = ?", (design, stage)))

    def finish_stage(self, design: str, stage: str, conn: sqlite3.Connection | None = None) -> None:
        sql = "INSERT OR REPLACE INTO stages (design, stage, finished) VALUES (?, ?, julianday('now'))"
        if conn is not None:
            conn.execute(sql, (design, stage))
        else:
            with self.transaction() as c:
                c.execute(sql, (design, stage))

    def reset_stages(self, stages: Sequence[str]) -> None:
        """Forget the listed stages' outputs (``--force-new-stage``)."""
        tables = {
            "mutate": ["states", "plans", "evaluations", "samples", "advantages"],
            "plan": ["plans", "evaluations", "samples", "advantages"],
            "score": ["evaluations", "samples", "advantages"],
            "advantage": ["advantages"],
            "export": [],
        }
        with self.transaction() as c:
            for stage in stages:
                for table in tables[stage]:
                    c.execute(f"DELETE FROM {table}")  # noqa: S608 - table names from the constant map above
                c.execute("DELETE FROM stages WHERE stage = ?", (stage,))
                if stage == "export":
                    c.execute("DELETE FROM exports")

    def forget_designs(self) -> None:
        """Forget every design's mutant set (``--force-new-stage mutate``)."""
        with self.transaction() as c:
            c.execute("DELETE FROM designs")

    def finished_stages(self) -> set[tuple[str, str]]:
        """Every (design, stage) finished."""
        return {(d, s) for d, s in self._all("SELECT design, stage FROM stages")}

    # ---------------------------------------------------------------- designs and states
    def put_design(self, row: DesignRow, states: Sequence[StateRow]) -> None:
        """Store a design, its mutant set and its states, and finish its mutate stage."""
        with self.transaction() as c:
            c.execute(
                "INSERT OR REPLACE INTO designs (name, ref, hash, mutdir, set_hash) VALUES (?, ?, ?, ?, ?)",
                (row.name, row.ref, row.hash, row.mutdir, row.set_hash),
            )
            c.execute("DELETE FROM states WHERE design = ?", (row.name,))
            c.executemany(
                "INSERT INTO states (design, state, selector) VALUES (?, ?, ?)",
                [(row.name, s.state, s.selector) for s in states],
            )
            self.finish_stage(row.name, "mutate", c)

    def design_row(self, name: str) -> DesignRow | None:
        rows = self._all("SELECT name, ref, hash, mutdir, set_hash FROM designs WHERE name = ?", (name,))
        if not rows:
            return None
        n, ref, hash_, mutdir, set_hash = rows[0]
        return DesignRow(n, ref, hash_, mutdir or "", set_hash or "")

    def states(self, design: str) -> list[str]:
        return [s for (s,) in self._all("SELECT state FROM states WHERE design = ? ORDER BY selector", (design,))]

    # ---------------------------------------------------------------- plans
    def put_plans(self, rows: Sequence[PlanRow]) -> None:
        with self.transaction() as c:
            c.executemany(
                "INSERT OR IGNORE INTO plans (design, state, sample, plan, record) VALUES (?, ?, ?, ?, ?)",
                [(r.design, r.state, r.sample, r.plan, json.dumps(r.record.as_json(), sort_keys=True)) for r in rows],
            )

    def plan_keys(self, design: str) -> set[tuple[str, int]]:
        return {(s, int(k)) for s, k in self._all("SELECT state, sample FROM plans WHERE design = ?", (design,))}

    def plans(self, design: str) -> list[PlanRow]:
        rows = self._all(
            "SELECT design, state, sample, plan, record FROM plans WHERE design = ? "
            "ORDER BY state = ? DESC, state, sample",
            (design, GOLDEN),
        )
        return [PlanRow(d, s, int(k), p, PlanRecord.from_json(json.loads(r))) for d, s, k, p, r in rows]

    # ---------------------------------------------------------------- evaluations
    def put_evaluation(self, design: str, result: EvalResult, counter: str | None = None) -> bool:
        """Store one evaluation result, keyed by its id, as the harness wrote it (and bump
        ``counter`` in the same transaction when it is new); False when it was already there."""
        with self.transaction() as c:
            cur = c.execute(
                "INSERT OR IGNORE INTO evaluations (design, key, result) VALUES (?, ?, ?)",
                (design, result.id, json.dumps(result.as_line(), sort_keys=True)),
            )
            fresh = cur.rowcount == 1
            if fresh and counter:
                c.execute(
                    "INSERT INTO counters (name, value) VALUES (?, 1) "
                    "ON CONFLICT(name) DO UPDATE SET value = value + 1",
                    (counter,),
                )
            return fresh

    def evaluation_count(self, design: str) -> int:
        return int(self._all("SELECT COUNT(*) FROM evaluations WHERE design = ?", (design,))[0][0])

    def evaluations(self, design: str) -> dict[str, EvalResult]:
        return {
            k: EvalResult.from_line(json.loads(r))
            for k, r in self._all("SELECT key, result FROM evaluations WHERE design = ?", (design,))
        }

    # ---------------------------------------------------------------- samples and advantages
    def put_samples(self, design: str, rows: Sequence[SampleResult]) -> None:
        """Replace ``design``'s samples and finish its score stage."""
        with self.transaction() as c:
            c.execute("DELETE FROM samples WHERE design = ?", (design,))
            c.executemany(
                "INSERT INTO samples (design, plan, state, outcome, reward, detail, ceiling) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        design,
                        r.plan,
                        r.state,
                        r.outcome.value,
                        r.reward,
                        json.dumps(r.detail, sort_keys=True) if r.detail is not None else None,
                        r.ceiling,
                    )
                    for r in rows
                ],
            )
            self.finish_stage(design, "score", c)

    def samples(self, design: str) -> list[SampleResult]:
        rows = self._all(
            "SELECT plan, state, outcome, reward, detail, ceiling FROM samples WHERE design = ? ORDER BY plan, state",
            (design,),
        )
        return [
            SampleResult(p, s, Outcome(o), float(r), json.loads(x) if x else None, top)
            for p, s, o, r, x, top in rows
        ]

    def put_advantages(self, rows: Sequence[AdvantageRow], designs: Sequence[str]) -> None:
        """Replace every advantage and finish the advantage stage of ``designs``."""
        with self.transaction() as c:
            c.execute("DELETE FROM advantages")
            c.executemany(
                "INSERT INTO advantages (design, plan, state, grp, advantage) VALUES (?, ?, ?, ?, ?)",
                [(r.design, r.plan, r.state, r.group, r.advantage) for r in rows],
            )
            for d in designs:
                self.finish_stage(d, "advantage", c)

    def advantages(self) -> list[AdvantageRow]:
        rows = self._all("SELECT design, plan, state, grp, advantage FROM advantages ORDER BY design, plan, state")
        return [AdvantageRow(d, p, s, g, float(a)) for d, p, s, g, a in rows]

    def put_export(self, fmt: str, manifest: dict[str, Any], designs: Sequence[str]) -> None:
        with self.transaction() as c:
            c.execute(
                "INSERT OR REPLACE INTO exports (format, manifest) VALUES (?, ?)",
                (fmt, json.dumps(manifest, sort_keys=True)),
            )
            for d in designs:
                self.finish_stage(d, "export", c)


def _check_foreign(path: Path) -> None:
    """Refuse a database that is not an hwtp run store, without touching it."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a usable SQLite database ({exc}); it was left untouched") from exc
    if app_id != APPLICATION_ID or "meta" not in tables:
        raise StoreError(f"{path}: not an hwtp run store (a foreign database); it was left untouched")


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current > SCHEMA_VERSION:
        raise StoreError(f"{path}: written by a newer hwtp (schema {current} > {SCHEMA_VERSION}); upgrade hwtp")
    for version in range(current + 1, SCHEMA_VERSION + 1):
        with conn:
            conn.executescript(_MIGRATIONS[version])
            conn.execute(f"PRAGMA user_version = {int(version)}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def _quick_check(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a damaged store before anything is written into it."""
    try:
        rows = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as exc:
        rows = [str(exc)]
    if rows != ["ok"]:
        raise StoreError(
            f"{path}: the run store is damaged ({'; '.join(map(str, rows))}); it was left untouched: "
            "move the run folder aside and start a new one"
        )


@contextlib.contextmanager
def _open_readonly(root: Path) -> Iterator[Store]:
    path = root / DB_NAME
    if not path.is_file():
        raise StoreError(f"{root}: no run store here ({DB_NAME} not found)")
    _check_foreign(path)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, check_same_thread=False)
        _quick_check(conn, path)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: {exc}") from exc
    try:
        yield Store(conn, root, readonly=True)
    finally:
        conn.close()


@contextlib.contextmanager
def open_store(root: Path, readonly: bool = False) -> Iterator[Store]:
    """Open (or create) the store of run folder ``root``, holding its exclusive lock.

    ``readonly=True`` opens an existing store for reading, without the lock, beside a run
    that may be writing it (``hwtp status``)."""
    if readonly:
        with _open_readonly(root) as store:
            yield store
        return
    root.mkdir(parents=True, exist_ok=True)
    path = root / DB_NAME
    lock_path = root / LOCK_NAME
    with lock_path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise StoreError(
                f"{root}: run folder is in use by another hwtp run ({holder}); "
                "wait for it to finish or use another folder"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}")
        lock.flush()
        if path.exists() and path.stat().st_size > 0:
            _check_foreign(path)
        try:
            conn = sqlite3.connect(path, timeout=30, isolation_level="DEFERRED", check_same_thread=False)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            _quick_check(conn, path)
            _migrate(conn, path)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: {exc}") from exc
        try:
            yield Store(conn, root)
        finally:
            conn.close()
            lock.seek(0)
            lock.truncate()
