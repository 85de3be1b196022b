"""Where hwtp writes: output paths checked before any work, and files written whole or not at all.

A command checks its outputs first (:func:`check_folder`, :func:`check_file`): a dangling symbolic
link, a file where a folder is needed, or a folder that cannot be written (read-only file system,
no permission) is refused with :class:`~hwtp.errors.OutputError` naming the option and the path,
before a build or a simulation. Files are then written through :func:`staged`: each beside its
final path under a hidden temporary name, flushed to disk, and renamed into place only when every
file of the set was written; on any error (a full disk) the temporary files are removed, so a
reader never sees a truncated shard or half an export.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from hwtp.env import CACHE_DIR_VAR
from hwtp.errors import OutputError


def _named(what: str, path: Path) -> str:
    return f"{what} {path}" if what else str(path)


def _reason(folder: Path) -> str:
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        pass
    return "permission denied"


def _writable_ancestor(path: Path, folder: Path, what: str) -> None:
    """Refuse ``path`` unless ``folder`` (its own folder, or ``path`` itself), or the nearest
    ancestor of it that exists, can be written into."""
    while not folder.exists():
        if folder.is_symlink():
            link = "" if folder == path else f"{folder} is "
            raise OutputError(
                f"{_named(what, path)}: {link}a symbolic link to {os.readlink(folder)}, which does not exist"
            )
        if folder.parent == folder:
            break
        folder = folder.parent
    if not folder.is_dir():
        raise OutputError(f"{_named(what, path)}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{_named(what, path)}: cannot write in {folder}: {_reason(folder)}")


def check_folder(path: Path, what: str = "") -> Path:
    """``path`` as an output folder, refused before any work when it cannot be made or written."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{_named(what, path)}: is a file, not a folder")
    _writable_ancestor(path, path, what)
    return path


def check_file(path: Path, what: str = "") -> Path:
    """``path`` as an output file, refused before any work when it cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{_named(what, path)}: is a folder, not a file")
    if path.is_symlink() and not path.exists():
        raise OutputError(f"{_named(what, path)}: a symbolic link to {os.readlink(path)}, which does not exist")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise OutputError(f"{_named(what, path)}: cannot write: {_reason(path.parent)}")
        return path
    _writable_ancestor(path, path.parent, what)
    return path


def failure(path: Path, exc: OSError) -> OutputError:
    """The error of a write to ``path`` that failed (``No space left on device``...)."""
    return OutputError(f"{path}: cannot write: {os.strerror(exc.errno) if exc.errno else exc}")


class Staged:
    """Files of one output written beside their final paths; see :func:`staged`."""

    def __init__(self, sync: bool = True) -> None:
        self._files: list[tuple[Path, Path]] = []  # (temporary, final)
        self._sync = sync

    def path(self, final: Path) -> Path:
        """The temporary path to write ``final``'s content to (a hidden name no reader globs)."""
        final = Path(os.path.realpath(final)) if Path(final).is_symlink() else Path(final)
        if final.exists() and not final.is_file():  # a device or a pipe (/dev/stdout): written in place
            self._files.append((final, final))
            return final
        temp = final.with_name(f".{final.name}.partial-{os.getpid()}")
        self._files.append((temp, final))
        return temp

    def write_bytes(self, final: Path, data: bytes) -> Path:
        temp = self.path(final)
        with temp.open("wb") as handle:
            handle.write(data)
        return temp

    def write_text(self, final: Path, text: str) -> Path:
        return self.write_bytes(final, text.encode("utf-8"))

    def _commit(self) -> None:
        files = [(temp, final) for temp, final in self._files if temp != final]
        for temp, _ in files if self._sync else ():
            fd = os.open(temp, os.O_RDONLY)
            try:
                os.fsync(fd)  # on disk before it gets its name: a crash leaves the old file or the new one
            finally:
                os.close(fd)
        for temp, final in files:
            os.replace(temp, final)
        for folder in {final.parent for _, final in files} if self._sync else ():
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _discard(self) -> None:
        for temp, final in self._files:
            if temp == final:
                continue
            with suppress(OSError):
                temp.unlink()


@contextmanager
def staged(sync: bool = True) -> Iterator[Staged]:
    """Write a set of files whole or not at all: every file is written under a temporary name in
    its folder; when the block ends, each is flushed to disk (``sync``; False for many small files
    that a rerun makes again) and renamed into place. An error (a full disk, a read-only folder)
    removes every temporary file and raises :class:`~hwtp.errors.OutputError` naming the file
    being written."""
    files = Staged(sync)
    try:
        yield files
        files._commit()
    except OSError as exc:
        files._discard()
        name = exc.filename if exc.filename else (files._files[-1][1] if files._files else "output")
        raise failure(Path(_final(files, name)), exc) from exc
    except BaseException:
        files._discard()
        raise


def _final(files: Staged, name: str | Path) -> Path:
    """The final path of a temporary file's name (an error names what the user asked for)."""
    for temp, final in files._files:
        if str(temp) == str(name):
            return final
    return Path(name)


def write_text(path: Path, text: str) -> None:
    """Write one text file whole or not at all (see :func:`staged`)."""
    with staged() as files:
        files.write_text(path, text)


def make_folder(path: Path) -> Path:
    """``path`` made with its parents; an error is :class:`~hwtp.errors.OutputError` naming it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise failure(path, exc) from exc
    return path


def cache_folder(path: Path) -> Path:
    """``path``, a folder of hwtp's cache, made and writable; else :class:`~hwtp.errors.OutputError`
    naming it and the variable that moves the cache."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        problem = None if os.access(path, os.W_OK | os.X_OK) else _reason(path)
    except OSError as exc:
        problem = exc.strerror or str(exc)
    if problem:
        raise OutputError(
            f"cache folder {path}: cannot write: {problem}; set {CACHE_DIR_VAR} to a folder you can write"
        )
    return path
