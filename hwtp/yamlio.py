"""Safe, bounded YAML/JSON loading that remembers where every value came from.

Plans come from LLMs and manifests from users: both are untrusted. Loading is bounded in
size, refuses YAML aliases (an alias bomb is refused at once, never expanded) and tags,
and records the line of every mapping key and list item so errors can name them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

#: Largest document accepted (bytes). A test plan is a few kB; 1 MiB is generous.
MAX_DOCUMENT_BYTES = 1 << 20

Path_ = tuple[Any, ...]
E = TypeVar("E", bound=Exception)


class YamlLoadError(ValueError):
    """A document that cannot be loaded; ``line`` is 1-based when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class TextDecodeError(ValueError):
    """Bytes that are not UTF-8 text; ``line`` is 1-based."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def decode_utf8(data: bytes) -> str:
    """``data`` as text, or :class:`TextDecodeError` naming the first bad byte's line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TextDecodeError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, column {column})", line
        ) from exc


def read_text(path: Path, error: type[Exception]) -> str:
    """The UTF-8 text of file ``path``, or ``error("path:line: ...")`` when it cannot be read
    or is not UTF-8 (the one place files of text are read with a located error)."""
    try:
        return decode_utf8(path.read_bytes())
    except TextDecodeError as exc:
        raise error(f"{path}:{exc.line}: {exc.message}") from exc
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from exc


_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (JSON ``"\\ud800"``: not Unicode, not encodable as
    UTF-8) replaced by U+FFFD, so it can be written to any file or database."""
    return _SURROGATES.sub("\ufffd", text)


def _surrogate_message(text: str, at: int) -> str:
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return f"not Unicode text: lone surrogate U+{ord(text[at]):04X} at column {column}"


@dataclass(frozen=True)
class Located:
    """A loaded document and the 1-based line of each path (``("tests", 0, "steps", 2)``)."""

    data: Any
    lines: dict[Path_, int] = field(default_factory=dict)

    def line_of(self, path: Path_) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None


def load_file(path: Path, error: type[E]) -> Located:
    """Read and load the YAML file ``path``; every failure is ``error("path:line: ...")``
    (unreadable, not UTF-8, not valid YAML, over the size bound)."""
    text = read_text(path, error)
    try:
        return load(text)
    except YamlLoadError as exc:
        raise error(f"{where(path, exc.line)}: not valid YAML: {exc.message}") from exc


def where(source: str | Path, line: int | None) -> str:
    """``source:line``, or ``source`` alone when the line is not known."""
    return f"{source}:{line}" if line else str(source)


def place(source: str | Path, located: Located, key: Path_, *, field: bool = True) -> str:
    """Where ``key`` is: ``source:line: field``, the line that of ``key`` in the loaded document
    (or of its nearest ancestor), the field ``key`` dotted (``design.sources.0``; ``(document)``
    for the whole document). With ``field=False`` only ``source:line``, for messages that name
    the place in their own words (a plan's ``test 't' step 2 (wait)``)."""
    at = where(source, located.line_of(key))
    return f"{at}: {'.'.join(str(k) for k in key) or '(document)'}" if field else at


def located_error(
    error: type[E], source: str | Path, located: Located, key: Path_, message: str, *, field: bool = True
) -> E:
    """The one located error: ``error("source:line: field: message")`` (see :func:`place`)."""
    return error(f"{place(source, located, key, field=field)}: {message}")


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and explicit tags outright."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise YamlLoadError("YAML aliases (*name) are not allowed", event.start_mark.line + 1)
        return super().compose_node(parent, index)


#: libyaml's composer when PyYAML has it (about 8x faster than the pure-Python one); aliases
#: are then refused while walking the node graph, where an alias is a node reached twice.
_FAST_LOADER: type | None = getattr(yaml, "CSafeLoader", None)


def _walk(loader: Any, node: yaml.Node, path: Path_, lines: dict[Path_, int], seen: set[int]) -> Any:
    if id(node) in seen:
        raise YamlLoadError("YAML aliases (*name) are not allowed", node.start_mark.line + 1)
    seen.add(id(node))
    lines.setdefault(path, node.start_mark.line + 1)
    if node.tag.startswith("!") or node.tag not in _ALLOWED_TAGS:
        raise YamlLoadError(f"YAML tag {node.tag!r} is not allowed", node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlLoadError("mapping keys must be plain names", key_node.start_mark.line + 1)
            key = str(key_node.value)  # keys are names: never 'on'->True, '1'->1
            if key in out:
                raise YamlLoadError(f"duplicate key {key!r}", key_node.start_mark.line + 1)
            child = (*path, key)
            lines[child] = key_node.start_mark.line + 1
            out[key] = _walk(loader, value_node, child, lines, seen)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(loader, item, (*path, i), lines, seen) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


_ALLOWED_TAGS = {
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}


def load(text: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> Located:
    """Load one YAML (or JSON) document with line positions.

    >>> load("a: 1\\nb: [x, 2]").data
    {'a': 1, 'b': ['x', 2]}
    >>> load("a: 1\\nb: [x, 2]").lines[("b",)]
    2
    """
    if len(text.encode("utf-8", errors="replace")) > max_bytes:
        raise YamlLoadError(f"document is larger than {max_bytes} bytes")
    surrogate = _SURROGATES.search(text)
    if surrogate is not None:  # not Unicode: no YAML parser can read it (libyaml raises UnicodeEncodeError)
        raise YamlLoadError(_surrogate_message(text, surrogate.start()), text.count("\n", 0, surrogate.start()) + 1)
    loader = _FAST_LOADER(text) if _FAST_LOADER is not None else _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return Located(None, {})
        lines: dict[Path_, int] = {}
        data = _walk(loader, node, (), lines, set())
        return Located(data, lines)
    except YamlLoadError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise YamlLoadError(f"{exc.problem or exc.context}", line) from exc
    except yaml.YAMLError as exc:
        raise YamlLoadError(str(exc)) from exc
    finally:
        loader.dispose()


def dump(data: Any) -> str:
    """YAML text of plain data, keys in insertion order (libyaml's emitter when available)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True)
