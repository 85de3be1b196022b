"""Response cache: LLM completions kept in one SQLite file, shared by concurrent processes.

Keys are the sha256 of the canonical JSON of whatever identifies a sample (see
:func:`cache_key`; :mod:`hwtp.policy.llm.client` passes endpoint, model, messages, sampling parameters except
``n``, and the sample index). Values are JSON objects (:mod:`hwtp.policy.llm.client` stores the fields of a
``Completion``). The cache knows nothing about API keys and is never given one.

Several processes may use one file at once: the database is in WAL mode, writers wait up to a
busy timeout for the lock, and a plain :meth:`ResponseCache.put` is ``INSERT OR IGNORE`` (the
first sample stored under a key wins). Every query is parameterised.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from hwtp import env
from hwtp.errors import ConfigError, PolicyError

log = logging.getLogger("hwtp.policy.llm.cache")

#: File name of the response database inside the cache folder.
FILENAME = "responses.sqlite3"
#: Bumped when the key or value layout changes, so old entries are simply never hit.
KEY_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def cache_key(parts: Mapping[str, Any]) -> str:
    """The sha256 hex digest of the canonical JSON of ``parts`` (sorted keys, no spaces).

    >>> cache_key({"b": 1, "a": [1, 2]}) == cache_key({"a": [1, 2], "b": 1})
    True
    """
    try:
        text = json.dumps(
            {"v": KEY_VERSION, **parts},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cannot build a cache key: {exc}") from exc
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_folder() -> Path:
    """The default folder of the response cache: ``<hwtp cache dir>/llm`` (see hwtp.env)."""
    return env.cache_dir() / "llm"


class ResponseCache:
    """A key → JSON-object store in ``folder/responses.sqlite3``.

    Usable as a context manager; :meth:`close` releases the connection. One instance may be
    shared by threads (a lock serialises its connection) and by asyncio tasks.
    """

    def __init__(self, folder: Path | None = None, *, busy_timeout_s: float = 30.0) -> None:
        self.folder = Path(folder) if folder is not None else default_folder()
        self.path = self.folder / FILENAME
        self._lock = threading.Lock()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the response cache {self.path}: {exc}") from exc
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(_SCHEMA)
        except sqlite3.Error as exc:
            self._conn.close()
            raise ConfigError(f"cannot open the response cache {self.path}: {exc}") from exc

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    def count(self) -> int:
        """The number of stored entries."""
        row = self._query_one("SELECT COUNT(*) FROM responses", ())
        return int(row[0]) if row else 0

    def get(self, key: str) -> dict[str, Any] | None:
        """The value stored under ``key``, or None (also for an unreadable entry, logged)."""
        row = self._query_one("SELECT value FROM responses WHERE key = ?", (key,))
        return self._decode(key, row[0]) if row else None

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored values of those ``keys`` that are present."""
        found: dict[str, dict[str, Any]] = {}
        for key in keys:
            value = self.get(key)
            if value is not None:
                found[key] = value
        return found

    def put(self, key: str, value: Mapping[str, Any], *, replace: bool = False) -> None:
        """Store ``value`` under ``key``.

        By default an existing entry is kept (``INSERT OR IGNORE``: concurrent writers of one
        key agree on the first); ``replace=True`` overwrites it (used by ``refresh``).
        """
        try:
            text = json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"cannot cache a value that is not plain JSON: {exc}") from exc
        if replace:
            sql = (
                "INSERT INTO responses (key, value, created) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value, created = excluded.created"
            )
        else:
            sql = "INSERT OR IGNORE INTO responses (key, value, created) VALUES (?, ?, ?)"
        self._execute(sql, (key, text, time.time()))

    def _decode(self, key: str, text: str) -> dict[str, Any] | None:
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            log.warning("ignoring an unreadable entry %s in %s", key[:12], self.path)
            return None
        return value

    def _query_one(self, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        with self._lock:
            try:
                row: tuple[Any, ...] | None = self._conn.execute(sql, args).fetchone()
            except sqlite3.Error as exc:
                raise PolicyError(f"response cache {self.path}: {exc}") from exc
        return row

    def _execute(self, sql: str, args: tuple[Any, ...]) -> None:
        with self._lock:
            try:
                self._conn.execute(sql, args)
            except sqlite3.Error as exc:
                raise PolicyError(f"response cache {self.path}: {exc}") from exc
