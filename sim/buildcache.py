"""The build cache: one simulator build per content hash, shared across runs and processes.

The key covers the sources and headers (names and text), the top module, the build options
(as the backend renders them) and the toolchain fingerprint. Every build is checked first by
:func:`hwtp.rtl.trust.check` on what the backend's preprocessor makes of it, which also refuses an
`` `include `` of any file that is not one of these headers: every file a build reads is in
its key. A build happens under an exclusive file
lock, in a private folder (``.tmp-PID-NAME-*`` next to the cache entries) that is renamed into place, in one
atomic step, only once it is complete: a build folder in the cache is always finished, and
an interrupted build leaves nothing another process would use or delete under a running
build. Private folders of dead processes (``kill -9``) are removed by the next build; two
processes asking for the same key at once build it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hwtp import env
from hwtp.errors import DesignError, InternalError, UntrustedError
from hwtp.outputs import cache_folder
from hwtp.rtl import trust
from hwtp.rtl.design import SourceFile, system_tasks_allowed
from hwtp.sim import procs
from hwtp.sim.backends import NO_OPTIONS, Backend, BuildOptions, write_sources

_MARKER = "hwtp-build.json"


@dataclass(frozen=True)
class Build:
    """A finished build: where it is and what it holds."""

    backend: Backend
    path: Path
    top: str
    key: str
    cached: bool
    seconds: float


def build_key(backend: Backend, sources: Sequence[SourceFile], top: str, options: BuildOptions,
              compiled: str = "") -> str:
    """The cache key; ``compiled``: the digest of what the preprocessor made of the sources
    (:func:`hwtp.rtl.trust.check`), which holds every file an include or a ``-v`` argument reads."""
    h = hashlib.sha256()
    h.update(json.dumps([backend.fingerprint(), top, backend.arguments(top, options), compiled]).encode())
    for src in sources:
        h.update(f"\0{src.path}\0{len(src.text)}\0".encode())
        h.update(src.text.encode())
    for header in options.headers:
        h.update(f"\0header\0{header.path}\0{len(header.text)}\0".encode())
        h.update(header.text.encode())
    return h.hexdigest()


def default_root() -> Path:
    return env.cache_dir() / "builds"


def ensure_build(
    backend: Backend,
    sources: Sequence[SourceFile],
    top: str,
    options: BuildOptions = NO_OPTIONS,
    root: Path | None = None,
    allow_escapes: bool | None = None,
) -> Build:
    """Return the build of ``sources``, building it unless the cache already has it; first
    refuse what :func:`hwtp.rtl.trust.check` refuses (``allow_escapes``, by default
    :func:`hwtp.rtl.design.system_tasks_allowed`: RTL that runs commands or writes files is built)."""
    allowed = system_tasks_allowed() if allow_escapes is None else allow_escapes
    compiled = trust.check(backend, sources, top, options, allow_escapes=allowed)
    key = build_key(backend, sources, top, options, compiled)
    base = cache_folder((root or default_root()).expanduser().resolve())
    folder = base / f"{backend.name}-{key[:24]}"
    lock_path = base / f"{folder.name}.lock"
    with lock_path.open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / _MARKER).is_file():
            return Build(backend, folder, top, key, cached=True, seconds=0.0)
        start = time.perf_counter()
        procs.sweep(base, ".tmp-")
        work = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-{folder.name}-", dir=base))
        try:
            work.chmod(0o755)
            paths = write_sources(work, sources, options.headers)
            backend.build(paths, top, work, options)
            seconds = time.perf_counter() - start
            (work / _MARKER).write_text(
                json.dumps({"key": key, "top": top, "backend": backend.name, "seconds": seconds}), encoding="utf-8"
            )
            if folder.exists():
                shutil.rmtree(folder)  # an unfinished build left by an older hwtp
            os.rename(work, folder)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        return Build(backend, folder, top, key, cached=False, seconds=seconds)


def keep_sources(sources: Sequence[SourceFile], message: str) -> str | None:
    """A copy of the sources of a build that failed and its message, in the cache's ``failed/``
    folder (named after their content), for a bug report; None when it cannot be written."""
    h = hashlib.sha256(message.encode())
    for src in sources:
        h.update(f"\0{src.path}\0".encode() + src.text.encode())
    folder = env.cache_dir() / "failed" / h.hexdigest()[:16]
    try:
        for src in sources:
            (folder / src.path).parent.mkdir(parents=True, exist_ok=True)
            (folder / src.path).write_text(src.text, encoding="utf-8")
        (folder / "error.txt").write_text(message + "\n", encoding="utf-8")
    except OSError:
        return None
    return str(folder)


def ensure_generated(
    backend: Backend,
    sources: Sequence[SourceFile],
    original: Sequence[SourceFile],
    top: str,
    options: BuildOptions = NO_OPTIONS,
    root: Path | None = None,
    allow_escapes: bool | None = None,
) -> Build:
    """:func:`ensure_build` of ``sources`` that hwtp generated from ``original`` (schemata): when
    they fail as a design would (:class:`DesignError`) but ``original`` builds, the fault is
    hwtp's, never the input's (:class:`InternalError`, the generated sources kept); when
    ``original`` fails too, its own error is raised. A refusal of the trust check stays what it
    is (:class:`UntrustedError`): the generated text holds the mutant set's edits, which are
    input (a ``mutants.json`` edited to splice a call in is refused, not blamed on hwtp)."""
    try:
        return ensure_build(backend, sources, top, options, root, allow_escapes)
    except UntrustedError:
        raise
    except DesignError as exc:
        ensure_build(backend, original, top, options, root, allow_escapes)
        raise InternalError(f"a schemata build hwtp generated does not build: {exc}",
                            kept=keep_sources(sources, str(exc))) from exc
