"""Read a cocotb Makefile for ``hwtp ci init``: a small parser for the usual assignments.

Understood: ``VAR = / := / ?= / += value`` (with ``export``/``override``), line continuations,
comments, ``ifeq``/``ifneq``/``ifdef``/``ifndef``/``else``/``endif`` on variables it knows,
``$(VAR)``/``${VAR}``, ``$(PWD)``, ``$(CURDIR)``, ``$(shell pwd)``, ``$(MAKEFILE_LIST)``,
``$(.VARIABLES)`` and the functions ``wildcard``, ``abspath``, ``realpath``, ``dir``, ``notdir``,
``addprefix``, ``addsuffix``, ``firstword``, ``lastword``, ``foreach``, ``filter``,
``filter-out``, ``subst``, ``patsubst``, ``strip``, and the ``include $(shell cocotb-config
--makefiles)/Makefile.sim`` line. The variables read are cocotb's: ``VERILOG_SOURCES``,
``TOPLEVEL``/``COCOTB_TOPLEVEL``, ``MODULE``/``COCOTB_TEST_MODULES``, ``COMPILE_ARGS`` and
``EXTRA_ARGS`` (``+incdir+``, ``-I``, ``-D``, ``+define+``, ``-G``, ``-P<top>.`` and ``-P <top>.``;
a ``-P`` for another module is not understood; other flags are kept as build arguments),
``SIM``, ``TESTCASE``/``COCOTB_TEST_FILTER``, ``COCOTB_RANDOM_SEED``
and ``PYTHONPATH``. Anything else in a value that is used is an
:class:`~hwtp.ci.detected.Unknown` with its file:line and the key to fill in. Nothing is run.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwtp.ci.detected import SIMULATORS, Detected, Unknown

_ASSIGN = re.compile(r"^(?:(?:export|override)\s+)*([A-Za-z_][A-Za-z0-9_.]*)\s*(::?=|:::=|\?=|\+=|!=|=)\s*(.*)$")
_RULE = re.compile(r"^[^\s=#][^=#]*:(?!=)")  # `target: prerequisites` (not `VAR := value`)
_CONDITIONAL = re.compile(r"^(ifeq|ifneq|ifdef|ifndef)\s*(.*)$")
#: cocotb's defaults for what a Makefile usually leaves unset.
_DEFAULTS = {"SIM": "icarus", "TOPLEVEL_LANG": "verilog"}
#: Variables of the Makefile hwtp reads, and the hwtp.yaml key each gives.
_KEYS = {"VERILOG_SOURCES": "design.sources", "TOPLEVEL": "design.top", "COCOTB_TOPLEVEL": "design.top",
         "MODULE": "tests.modules", "COCOTB_TEST_MODULES": "tests.modules", "COMPILE_ARGS": "build",
         "EXTRA_ARGS": "build", "SIM": "build.simulator", "TESTCASE": "tests.filter",
         "COCOTB_TESTCASE": "tests.filter", "COCOTB_TEST_FILTER": "tests.filter",
         "COCOTB_RANDOM_SEED": "tests.random_seed", "RANDOM_SEED": "tests.random_seed",
         "PYTHONPATH": "tests.paths"}
_UNUSED = {"VHDL_SOURCES": "VHDL sources are left out: hwtp mutates Verilog and SystemVerilog",
           "SIM_ARGS": "run-time simulator arguments are not passed by hwtp ci",
           "PLUSARGS": "plusargs are not passed by hwtp ci", "COCOTB_PLUSARGS": "plusargs are not passed by hwtp ci"}


class _NotUnderstood(Exception):
    pass


@dataclass
class _Var:
    value: str
    expanded: bool  # := (expanded at assignment) or = (at use)
    line: int
    parts: tuple[tuple[int, str], ...] = ()  # a recursive variable's (line, text) of each = and +=


class _Make:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.folder = path.resolve().parent
        self.vars: dict[str, _Var] = {}
        self.cocotb = False

    # -- expansion -------------------------------------------------------------------------
    def expand(self, text: str, depth: int = 0) -> str:
        if depth > 20:
            raise _NotUnderstood("a variable that refers to itself")
        out, i = [], 0
        while i < len(text):
            c = text[i]
            if c != "$":
                out.append(c)
                i += 1
                continue
            nxt = text[i + 1] if i + 1 < len(text) else ""
            if nxt == "$":
                out.append("$")
                i += 2
            elif nxt in "({":
                close = {"(": ")", "{": "}"}[nxt]
                end = _matching(text, i + 1, nxt, close)
                out.append(self.reference(text[i + 2:end], depth))
                i = end + 1
            elif nxt.isalnum() or nxt == "_":
                out.append(self.variable(nxt, depth))
                i += 2
            else:
                raise _NotUnderstood(f"`{text[i:i + 2]}`")
        return "".join(out)

    def foreach(self, rest: str, depth: int) -> str:
        """``$(foreach VAR,LIST,TEXT)``: TEXT expanded once per word of LIST with VAR set to it."""
        parts = _split_args(rest)
        if len(parts) != 3:
            raise _NotUnderstood("`$(foreach ...)` without three arguments")
        name = self.expand(parts[0], depth + 1).strip()
        saved = self.vars.get(name)
        out = []
        try:
            for word in self.expand(parts[1], depth + 1).split():
                self.vars[name] = _Var(word, True, 0)
                out.append(self.expand(parts[2], depth + 1))
        finally:
            if saved is None:
                self.vars.pop(name, None)
            else:
                self.vars[name] = saved
        return " ".join(out)

    def variable(self, name: str, depth: int) -> str:
        if name in ("PWD", "CURDIR"):
            return str(self.folder)
        if name == ".VARIABLES":
            return " ".join(self.vars)
        if name == "MAKEFILE_LIST":
            return str(self.path.resolve())
        var = self.vars.get(name)
        if var is None:
            return _DEFAULTS.get(name, "")
        return var.value if var.expanded else self.expand(var.value, depth + 1)

    def reference(self, inner: str, depth: int) -> str:
        match = re.match(r"^([a-z]+)\s+(.*)$", inner, re.DOTALL)
        if not match:
            return self.variable(self.expand(inner, depth + 1).strip(), depth)
        function, rest = match.group(1), match.group(2)
        if function == "shell":
            command = rest.strip()
            if command == "pwd":
                return str(self.folder)
            if command.startswith("cocotb-config"):
                return "$(cocotb-config)"
            raise _NotUnderstood(f"`$(shell {command})`")
        args = [self.expand(a, depth + 1) for a in _split_args(rest)]
        words = args[-1].split() if args else []
        if function == "wildcard" and len(args) == 1:
            found = []
            for pattern in words:
                full = pattern if os.path.isabs(pattern) else str(self.folder / pattern)
                found += sorted(glob.glob(full))
            return " ".join(found)
        if function in ("abspath", "realpath") and len(args) == 1:
            return " ".join(os.path.abspath(w if os.path.isabs(w) else self.folder / w) for w in words)
        if function == "dir" and len(args) == 1:
            return " ".join(os.path.dirname(w) + "/" if "/" in w else "./" for w in words)
        if function == "notdir" and len(args) == 1:
            return " ".join(os.path.basename(w) for w in words)
        if function in ("firstword", "lastword") and len(args) == 1:
            return (words[0] if function == "firstword" else words[-1]) if words else ""
        if function == "foreach":
            return self.foreach(rest, depth)
        if function in ("filter", "filter-out") and len(args) == 2:
            patterns = [_pattern(p) for p in args[0].split()]
            keep = function == "filter"
            return " ".join(w for w in words if any(p.match(w) for p in patterns) == keep)
        if function == "subst" and len(args) == 3:
            return args[2].replace(args[0], args[1])
        if function == "patsubst" and len(args) == 3:
            return " ".join(_patsubst(args[0].strip(), args[1].strip(), w) for w in words)
        if function == "strip" and len(args) == 1:
            return " ".join(words)
        if function in ("addprefix", "addsuffix") and len(args) == 2:
            fix = args[0].strip()
            return " ".join(fix + w if function == "addprefix" else w + fix for w in words)
        raise _NotUnderstood(f"`$({function} ...)`")

    # -- conditions ------------------------------------------------------------------------
    def condition(self, kind: str, text: str) -> bool:
        if kind in ("ifdef", "ifndef"):
            name = self.expand(text).strip()
            defined = bool(self.variable(name, 0)) if name in self.vars or name in _DEFAULTS else False
            return defined if kind == "ifdef" else not defined
        text = text.strip()
        if text.startswith("(") and text.endswith(")"):
            parts = _split_args(text[1:-1])
        else:
            parts = [p.strip("'\"") for p in shlex.split(text)]
        if len(parts) != 2:
            raise _NotUnderstood(f"`{kind} {text}`")
        a, b = (self.expand(p).strip() for p in parts)
        return (a == b) if kind == "ifeq" else (a != b)


def _matching(text: str, start: int, open_: str, close: str) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i
    raise _NotUnderstood(f"an unclosed `$({text[start + 1:start + 20]}`")


def _pattern(text: str) -> re.Pattern[str]:
    """A make pattern (one ``%`` matches any text) as a regular expression."""
    head, percent, tail = text.partition("%")
    return re.compile(re.escape(head) + (".*" if percent else "") + re.escape(tail) + r"\Z")


def _patsubst(pattern: str, replacement: str, word: str) -> str:
    head, percent, tail = pattern.partition("%")
    if not percent:
        return replacement if word == pattern else word
    if not (word.startswith(head) and word.endswith(tail) and len(word) >= len(head) + len(tail)):
        return word
    stem = word[len(head):len(word) - len(tail)]
    return replacement.replace("%", stem, 1)


def _split_args(text: str) -> list[str]:
    """Function arguments split at top-level commas."""
    out: list[str] = []
    current: list[str] = []
    depth = 0
    for c in text:
        if c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(current))
            current = []
        else:
            current.append(c)
    out.append("".join(current))
    return out


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with continuations joined and comments removed."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    in_rule = False  # a tab-indented line is a recipe line only after a rule (else, e.g. in ifeq, text)
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.startswith("\t") and not pending and in_rule:
            continue  # a recipe line
        if raw.strip() and not raw.startswith("\t") and not pending:
            in_rule = bool(_RULE.match(raw)) and not _ASSIGN.match(raw.strip())
        line = re.sub(r"(?<!\\)#.*$", "", raw)
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, (pending + line).strip()))
        pending = ""
    if pending:
        out.append((start, pending.strip()))
    return out


@dataclass
class _Flags:
    includes: list[str]
    defines: list[tuple[str, str]]
    parameters: list[tuple[str, str]]
    args: list[str]
    unknown: list[tuple[str, str]]  # (what is wrong, the text that says it)


def _flags(words: list[str], top: str | None) -> _Flags:
    """Compile arguments split into include folders, defines, parameters and the rest (and
    what could not be read)."""
    out = _Flags([], [], [], [], [])
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("+incdir+"):
            out.includes += [d for d in w[len("+incdir+"):].split("+") if d]
        elif w == "-I" and i + 1 < len(words):
            out.includes.append(words[i + 1])
            i += 1
        elif w.startswith("-I") and len(w) > 2:
            out.includes.append(w[2:])
        elif w.startswith("+define+"):
            for d in w[len("+define+"):].split("+"):
                if d:
                    name, _, value = d.partition("=")
                    out.defines.append((name, value))
        elif w.startswith("-D") and len(w) > 2:
            name, _, value = w[2:].partition("=")
            out.defines.append((name, value))
        elif w.startswith("-G") and "=" in w:
            name, _, value = w[2:].partition("=")
            out.parameters.append((name, value))
        elif w.startswith("-P") and (w != "-P" or i + 1 < len(words)):
            target = w[2:] if w != "-P" else words[i + 1]
            i += w == "-P"
            module, dot, assignment = target.partition(".")
            name, equals, value = assignment.partition("=")
            if top and module == top and dot and equals and name:
                out.parameters.append((name, value))
            else:
                out.unknown.append((f"`-P {target}` sets no parameter of the top {top or '(unknown)'}", target))
        else:
            out.args.append(w)
        i += 1
    return out


def looks_like_cocotb(text: str) -> bool:
    """Whether a Makefile looks like a cocotb one (worth parsing)."""
    return "cocotb-config" in text or bool(re.search(r"^\s*(?:COCOTB_)?TOPLEVEL\s*[:?+]?=", text, re.MULTILINE))


def read_makefile(path: Path, root: Path) -> Detected | None:
    """What the cocotb Makefile ``path`` (under the project folder ``root``) builds and tests;
    None when it does not look like a cocotb Makefile."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if not looks_like_cocotb(text):
        return None
    reader = _Reader(path, root)
    for number, line in _logical_lines(text):
        if line:
            reader.line(number, line)
    fields = reader.fields(text)
    return Detected(reader.rel, unknown=tuple(reader.unknown), notes=tuple(reader.notes), **fields)


class _Reader:
    """One pass over a Makefile's logical lines, a method per construct (conditionals,
    ``include``, assignments), then the fields of :class:`Detected` from the variables; what
    it cannot read goes to ``unknown`` with its line, what hwtp ci leaves out to ``notes``."""

    def __init__(self, path: Path, root: Path) -> None:
        self.rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        self.make = _Make(path)
        self.unknown: list[Unknown] = []
        self.notes: list[str] = []
        self.stack: list[tuple[bool, bool]] = []  # (this branch active, some branch of the chain taken)
        self.top: str | None = None  # the top module, once read (-P flags name it)

    def _todo(self, line: int, what: str, key: str) -> None:
        self.unknown.append(Unknown(self.rel, line, what, key))

    # -- the lines ------------------------------------------------------------------------------
    def line(self, number: int, line: str) -> None:
        cond = _CONDITIONAL.match(line)
        if cond:
            self._if(cond.group(1), cond.group(2), number)
        elif line == "endif":
            if self.stack:
                self.stack.pop()
        elif line.startswith("else"):
            self._else(line[4:].strip(), number)
        elif not self._active():
            pass
        elif line.startswith(("include ", "-include ", "sinclude ")):
            self._include(line, number)
        else:
            assign = _ASSIGN.match(line)
            if assign:  # else a rule or a directive that sets no variable
                self._assign(assign.group(1), assign.group(2), assign.group(3), number)

    def _active(self) -> bool:
        return all(a for a, _ in self.stack)

    def _evaluate(self, kind: str, rest: str, number: int) -> bool:
        try:
            return self.make.condition(kind, rest)
        except _NotUnderstood as exc:
            self._todo(number, f"the condition {exc} is not evaluated (its first branch is read)",
                       "what the branches set")
            return True

    def _if(self, kind: str, rest: str, number: int) -> None:
        taken = self._evaluate(kind, rest, number) if self._active() else False
        self.stack.append((taken, taken))

    def _else(self, rest: str, number: int) -> None:
        if not self.stack:
            return
        _, done = self.stack.pop()
        chained = _CONDITIONAL.match(rest)
        parent = self._active()
        if chained and parent and not done:
            taken = self._evaluate(chained.group(1), chained.group(2), number)
        else:
            taken = parent and not done and not chained
        self.stack.append((taken, done or taken))

    def _include(self, line: str, number: int) -> None:
        if "cocotb-config" in line and "makefiles" in line:
            self.make.cocotb = True
        else:
            self._todo(number, f"`{line}`: the included file is not read", "what it sets")

    def _assign(self, name: str, op: str, value: str, number: int) -> None:
        make = self.make
        if op == "!=":
            self._todo(number, f"`{name} != ...` (a shell command)", _KEYS.get(name, name))
        elif op == "?=" and name in make.vars:
            pass
        elif op in (":=", "::=", ":::="):
            try:
                make.vars[name] = _Var(make.expand(value), True, number)
            except _NotUnderstood as exc:
                make.vars[name] = _Var("", True, number)
                if name in _KEYS:
                    self._todo(number, f"{name}: {exc} is not understood", _KEYS[name])
        elif op == "+=" and name in make.vars:
            old = make.vars[name]
            try:
                added = make.expand(value) if old.expanded else value
            except _NotUnderstood as exc:
                self._todo(number, f"{name}: {exc} is not understood", _KEYS.get(name, name))
                return
            parts = (*old.parts, (number, value)) if not old.expanded else ()
            make.vars[name] = _Var(f"{old.value} {added}".strip(), old.expanded, number, parts)
        else:
            make.vars[name] = _Var(value, False, number, ((number, value),))

    # -- the variables ----------------------------------------------------------------------------
    def get(self, name: str) -> str | None:
        """The value of ``name`` as make would use it; each assignment that cannot be read is a
        TODO, and what can be read of the others is kept."""
        var = self.make.vars.get(name)
        if var is None:
            return None
        if var.expanded:
            return var.value
        try:
            return self.make.expand(var.value)
        except _NotUnderstood:
            pass
        values = []
        for line, part in var.parts or ((var.line, var.value),):
            try:
                values.append(self.make.expand(part))
            except _NotUnderstood as exc:
                self._todo(line, f"{name}: {exc} is not understood", _KEYS.get(name, name))
        return " ".join(v for v in values if v) if values else None

    def fields(self, text: str) -> dict[str, Any]:
        """The keyword fields of :class:`Detected`, in the order their TODOs and notes are told."""
        fields: dict[str, Any] = {**self._design(), **self._build(text), **self._tests()}
        for name, why in _UNUSED.items():
            if self.get(name):
                self.notes.append(f"{self.rel}:{self.make.vars[name].line}: {name}: {why}")
        if not self.make.cocotb:
            self.notes.append(f"{self.rel}: no `include $(shell cocotb-config --makefiles)/Makefile.sim` line")
        return fields

    def _design(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        sources = self.get("VERILOG_SOURCES")
        if sources is not None:
            out["sources"] = tuple((self.make.folder / w).resolve() for w in sources.split())
        elif "VERILOG_SOURCES" not in self.make.vars:
            self._todo(0, "no VERILOG_SOURCES", "design.sources")
        top = self.get("COCOTB_TOPLEVEL") or self.get("TOPLEVEL")
        if top:
            out["top"] = self.top = top.split()[0]
        modules = self.get("COCOTB_TEST_MODULES") or self.get("MODULE")
        if modules:
            out["modules"] = tuple(m for m in re.split(r"[,\s]+", modules) if m)
        return out

    def _build(self, text: str) -> dict[str, Any]:
        """Include folders, defines, parameters and the other build arguments, and the simulator."""
        make = self.make
        words: list[str] = []
        for name in ("COMPILE_ARGS", "EXTRA_ARGS"):
            value = self.get(name)
            if value:
                try:
                    words += shlex.split(value)
                except ValueError:
                    self._todo(make.vars[name].line, f"{name}: unbalanced quotes", "build.args")
        flags = _flags(words, self.top)
        where = max((make.vars[n].line for n in ("COMPILE_ARGS", "EXTRA_ARGS") if n in make.vars), default=0)
        lines = text.splitlines()
        for problem, token in flags.unknown:  # at the line that spells it, when one does
            at = next((i for i, t in enumerate(lines, start=1) if token in t), where)
            self._todo(at, f"COMPILE_ARGS: {problem}", "build.parameters")
        out: dict[str, Any] = {
            "includes": tuple((make.folder / d).resolve() for d in flags.includes),
            "defines": tuple(flags.defines),
            "parameters": tuple(flags.parameters),
            "args": tuple(flags.args),
        }
        sim = self.get("SIM") or _DEFAULTS["SIM"]
        if sim in SIMULATORS:
            out["simulator"] = sim
        else:
            self.notes.append(f"{self.rel}: SIM is {sim}; hwtp ci builds with Verilator (build.simulator)")
        return out

    def _tests(self) -> dict[str, Any]:
        """Which tests run, their seed, and where Python finds them."""
        out: dict[str, Any] = {}
        test_filter = self.get("COCOTB_TEST_FILTER")
        testcase = self.get("COCOTB_TESTCASE") or self.get("TESTCASE")
        if test_filter:
            out["test_filter"] = test_filter
        elif testcase:
            names = [n for n in re.split(r"[,\s]+", testcase) if n]
            out["test_filter"] = r"\.(" + "|".join(rf".*{re.escape(n)}" for n in names) + ")$"
        seed = self.get("COCOTB_RANDOM_SEED") or self.get("RANDOM_SEED")
        if seed:
            if seed.isdigit():
                out["random_seed"] = int(seed)
            else:
                var = self.make.vars.get("COCOTB_RANDOM_SEED", self.make.vars.get("RANDOM_SEED", _Var("", True, 0)))
                self._todo(var.line, f"the random seed {seed!r} is not an integer", "tests.random_seed")
        python_path = [p for p in (self.get("PYTHONPATH") or "").split(":") if p]
        folder = self.make.folder
        out["module_paths"] = tuple(dict.fromkeys([folder, *((folder / p).resolve() for p in python_path)]))
        out["test_dir"] = folder  # make runs the simulator in the Makefile's folder
        return out
