"""The RTL trust check: refuse RTL that leaves the simulation, as the simulator compiles it.

The check reads what the compiler reads: the build's sources and headers through the
backend's own preprocessor (:meth:`hwtp.sim.backends.Backend.preprocess`: Verilator's ``-E``,
Icarus's ``-E``), with the same flags, defines and include folders as the build, so its
predefined macros (``VERILATOR``, ``__ICARUS__``, ``VERILATOR_TIMING``...), ``+define+``/``-D``
from the configuration and every `` `include `` count. In that text it refuses:

- calls that run commands or host code or write files (:data:`ESCAPING_CALLS`, Verilator's
  ``$c``), and DPI imports and exports (``import "DPI-C"``);
- what the backend passes through to its C++ compiler or does not let anyone read: every
  compiler directive left after preprocessing that is not plain Verilog
  (`` `systemc_header ``... `` `verilog ``, `` `verilator_config ``, `` `pragma protect ``,
  `` `protect ``) and every ``/*verilator ...*/`` metacomment not in :data:`METACOMMENTS`;
- an `` `include `` of a file that is not one of the design's own files (an absolute path, or
  one that leaves the design folder), even for trusted RTL;
- build arguments that bring in code or files the preprocessed text does not hold (C++
  files, compiler and linker flags, library folders, argument files, VPI modules:
  :meth:`hwtp.sim.backends.Backend.opaque_arguments`).

:func:`check` returns the digest of the preprocessed text, which the build cache's key holds:
every file the compiler reads is in the key.

Text is read with a small lexer (strings, comments and escaped identifiers are not code);
:func:`check` is called by design loading (:func:`hwtp.rtl.design.check_trusted`) and by every
build (:func:`hwtp.sim.buildcache.ensure_build`), so nothing reaches a simulator unchecked.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from hwtp import env
from hwtp.errors import UntrustedError
from hwtp.rtl.frontend import NO_OPTIONS, BuildOptions, SourceFile
from hwtp.sim.backends import Backend, Preprocessed, source_path

#: System tasks and functions through which RTL reaches outside the simulation: they run a
#: command or host code, or create and write files. Reading files (``$readmemh``) and printing
#: (``$display``, ``$fwrite`` to stdout) stay allowed; every file a design could write needs
#: ``$fopen``, ``$writemem*`` or a waveform dump.
ESCAPING_CALLS: dict[str, str] = {
    "$system": "runs a shell command",
    "$fopen": "opens a file (for writing)",
    "$fopena": "opens a file (for writing)",
    "$fopenw": "opens a file (for writing)",
    "$fopenr": "opens a file",
    "$writememh": "writes a file",
    "$writememb": "writes a file",
}
_VERILATOR_C = re.compile(r"^\$c(?:pure)?\d*$")  # Verilator's $c(...): C++ pasted into the model
_DUMP = re.compile(r"^\$f?dump\w*$")  # $dumpfile, $dumpvars, $dumpports, $fdumpvars...: waveform files

#: Directives a preprocessor leaves for the compiler that are plain Verilog (no code, no files);
#: `` `pragma `` is too, but for `` `pragma protect ``.
PLAIN_DIRECTIVES = frozenset(
    {
        "line",
        "timescale",
        "begin_keywords",
        "end_keywords",
        "celldefine",
        "endcelldefine",
        "default_nettype",
        "resetall",
        "unconnected_drive",
        "nounconnected_drive",
        "default_decay_time",
        "default_trireg_strength",
        "delay_mode_distributed",
        "delay_mode_path",
        "delay_mode_unit",
        "delay_mode_zero",
    }
)
#: ``/*verilator NAME*/`` metacomments that only tune lint, visibility, coverage or tracing.
METACOMMENTS = frozenset(
    {
        "clock_enable",
        "clocker",
        "no_clocker",
        "coverage_block_off",
        "coverage_off",
        "coverage_on",
        "forceable",
        "full_case",
        "parallel_case",
        "hier_block",
        "inline_module",
        "no_inline_module",
        "no_inline_task",
        "isolate_assignments",
        "lint_off",
        "lint_on",
        "lint_save",
        "lint_restore",
        "public",
        "public_flat",
        "public_flat_rd",
        "public_flat_rw",
        "public_module",
        "public_on",
        "public_off",
        "sc_bv",
        "sformat",
        "split_var",
        "tag",
        "timing_off",
        "timing_on",
        "tracing_off",
        "tracing_on",
        "trace_init_task",
    }
)

_TOKEN = re.compile(
    r'(?P<string>"(?:\\.|[^"\\\n])*"?)'
    r"|(?P<block>/\*.*?(?:\*/|\Z))"
    r"|(?P<comment>//[^\n]*)"
    r"|(?P<escaped>\\\S+)"
    r"|(?P<directive>`[A-Za-z_][A-Za-z0-9_$]*)"
    r"|(?P<system>\$[A-Za-z0-9_$]+)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)"
    r"|(?P<newline>\n)"
    r"|(?P<space>[ \t\r\f\v]+)"
    r"|(?P<other>.)",
    re.DOTALL,
)
_LINE_DIRECTIVE = re.compile(r'[ \t]+(\d+)[ \t]+"((?:\\.|[^"\\])*)"[ \t]+\d')
_METACOMMENT = re.compile(r"^/\*\s*verilator\b\s*([A-Za-z_]\w*)?")


@dataclass(frozen=True)
class Finding:
    """One construct the check refuses: where (``file`` None when the preprocessor did not say),
    what and why, and the line of preprocessed text it is on."""

    file: str | None
    line: int
    construct: str
    why: str
    text: str
    escapes: bool = True  # False: an include from outside, refused even for trusted RTL


def scan(text: str) -> list[Finding]:
    """The constructs of preprocessed ``text`` that leave the simulation or that the compiler
    gets without this check being able to read them (see the module's docstring); positions
    follow the text's `` `line `` directives."""
    found: list[Finding] = []
    lines = text.split("\n")
    file: str | None = None
    line = 1
    out_line = 0  # the line of ``text`` the scan is on
    dpi = ""  # "import" or "export" just before: a string next is a DPI declaration

    def add(construct: str, why: str) -> None:
        found.append(Finding(file, line, construct, why, lines[min(out_line, len(lines) - 1)].strip()))

    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        value = match.group()
        if kind in ("space", "comment"):
            continue
        if kind == "newline":
            line += 1
            out_line += 1
            continue
        if kind == "block":
            meta = _METACOMMENT.match(value)
            if meta and meta.group(1) not in METACOMMENTS:
                add(f"/*verilator {meta.group(1) or ''}*/", "is a Verilator metacomment hwtp does not know")
            breaks = value.count("\n")
            line += breaks
            out_line += breaks
            continue
        if kind == "string":
            breaks = value.count("\n")  # a string continued with a backslash
            if dpi:
                add(f"{dpi} {value}", "calls host C code (DPI)" if dpi == "import" else "lets host C code in (DPI)")
            dpi = ""
            line += breaks
            out_line += breaks
            continue
        dpi = value if kind == "word" and value in ("import", "export") else ""
        if kind == "directive":
            name = value[1:]
            end = text.find("\n", match.end())
            rest = text[match.end() : end if end >= 0 else len(text)]
            if name == "line":
                directive = _LINE_DIRECTIVE.match(rest)
                if directive:  # the next line is line N of FILE
                    file, line = directive.group(2), int(directive.group(1)) - 1
                continue
            if name == "pragma" and not re.match(r"\s+protect\b", rest):
                continue
            if name in PLAIN_DIRECTIVES:
                continue
            if name.startswith("systemc_"):
                add(value, "pastes C++ into the model")
            elif name in ("pragma", "protect", "endprotect"):
                add(
                    f"{value}{' protect' if name == 'pragma' else ''}",
                    "hides code from the check (a protected envelope)",
                )
            else:
                add(value, "is a directive the simulator takes, which hwtp does not check")
        elif kind == "system":
            why = ESCAPING_CALLS.get(value)
            if why is None and _VERILATOR_C.match(value):
                why = "runs C++ code"
            if why is None and _DUMP.match(value):
                why = "writes a waveform file"
            if why:
                add(value, why)
    return found


_checked: dict[str, str] = {}
_checked_lock = threading.Lock()


def _memo_key(backend: Backend, sources: Sequence[SourceFile], top: str, options: BuildOptions) -> str:
    h = hashlib.sha256(repr((backend.name, top, backend.arguments(top, options))).encode())
    for src in (*sources, *options.headers):
        h.update(f"\0{src.path}\0{len(src.text)}\0".encode())
        h.update(src.text.encode())
    return h.hexdigest()


def findings(
    backend: Backend, sources: Sequence[SourceFile], top: str, options: BuildOptions = NO_OPTIONS
) -> tuple[Preprocessed, list[Finding]]:
    """What ``backend`` compiles of ``sources`` (with ``options``) and what in it is refused."""
    pre = backend.preprocess(sources, top, options)
    own = {posixpath.normpath(s.path) for s in (*sources, *options.headers)}
    outside = [
        Finding(
            None,
            0,
            f'`include "{name}"',
            "reads a file outside the design folder, or by an absolute path (a design builds from its own files: "
            "copy it into the folder and include it by a relative path)",
            "",
            escapes=False,
        )
        for name in pre.includes
        if posixpath.normpath(name) not in own
    ]
    return pre, [*outside, *scan(pre.text)]


def _locate(finding: Finding, sources: Sequence[SourceFile]) -> tuple[str, int]:
    """Where a finding is in the sources: the preprocessor's position, else the first source
    line holding its text (or, for an include, its file name)."""
    if finding.file is not None:
        return finding.file, finding.line
    included = finding.construct.startswith("`include")
    needle = posixpath.basename(finding.construct.split('"')[1]) if included else finding.text
    for src in sources:
        for number, text in enumerate(src.text.splitlines(), start=1):
            if needle and needle in text:
                return src.path, number
    return (sources[0].path if sources else "(design)"), 0


def check(
    backend: Backend,
    sources: Sequence[SourceFile],
    top: str,
    options: BuildOptions = NO_OPTIONS,
    root: str | None = None,
    allow_escapes: bool = False,
) -> str:
    """Raise :class:`DesignError` naming file:line, the construct and why, when what
    ``backend`` compiles of ``sources`` leaves the simulation or includes a file from outside
    the design (see the module's docstring). ``allow_escapes`` (``--allow-system-tasks``):
    only the includes are refused. ``root``: the design folder, prefixed to relative paths in
    the message. Returns the sha256 of the text the compiler parses (every file it reads:
    the build cache's key holds it). A check of the same text, flags and backend is done once
    per process."""
    key = _memo_key(backend, sources, top, options) + ("-allow" if allow_escapes else "")
    with _checked_lock:
        if key in _checked:
            return _checked[key]
    arguments = backend.opaque_arguments(options)
    if arguments and not allow_escapes:  # refused before the preprocessor runs with them
        raise UntrustedError(
            f"(build.args): {arguments[0]} brings code or files into the build that the check cannot read: hwtp "
            f"refuses it unless you trust this build (--allow-system-tasks or {env.ALLOW_SYSTEM_TASKS_VAR}=1)"
        )
    pre, found = findings(backend, sources, top, options)
    found = [f for f in found if not (allow_escapes and f.escapes)]
    if found:
        first = found[0]
        file, line = _locate(first, [*sources, *options.headers])
        file = source_path(file)
        if root is not None and not file.startswith("/"):
            file = posixpath.join(root, file)
        where = f"{file}:{line}" if line else file
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        if not first.escapes:
            raise UntrustedError(f"{where}: {first.construct} {first.why}")
        raise UntrustedError(
            f"{where}: {first.construct} {first.why}{more} (as {backend.name} compiles it): hwtp refuses RTL that "
            f"runs commands or host code, writes files or reads files outside the design; if you trust this "
            f"design, pass --allow-system-tasks or set {env.ALLOW_SYSTEM_TASKS_VAR}=1"
        )
    digest = hashlib.sha256(pre.text.encode()).hexdigest()
    with _checked_lock:
        _checked[key] = digest
    return digest
