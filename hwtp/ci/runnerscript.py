"""Read a cocotb runner script (``cocotb_tools.runner``) for ``hwtp ci init``, without running it.

The script is parsed with :mod:`ast`. Its first ``runner.build(...)`` and ``runner.test(...)``
calls (on a value of ``get_runner(...)``) give sources, top, include folders, defines,
parameters, build arguments, test modules and test folder. Only these are evaluated: literals,
lists, tuples and dicts of them, names assigned by plain statements before the call (at module
level or in the calling function), ``__file__``, ``Path(...)`` and its ``/``, ``.parent``,
``.parents[n]``, ``.resolve()``, ``.absolute()``, ``.joinpath()``, ``.name``, ``.stem``,
``os.path.join``/``dirname``/``abspath``/``realpath``/``basename``/``splitext``, ``str()``,
``+`` of strings or lists, f-strings of those, a list comprehension over one of those, and
``os.getenv``/``os.environ.get`` (their default). Anything else is an
:class:`~hwtp.ci.detected.Unknown` with its file:line and the ``hwtp.yaml`` key to fill in.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwtp.ci.detected import SIMULATORS, Detected, Unknown, module_folder, pytest_base

#: runner.build / runner.test keywords, and the hwtp.yaml key each gives.
_BUILD_KEYS = {"sources": "design.sources", "verilog_sources": "design.sources", "hdl_toplevel": "design.top",
               "includes": "build.includes", "defines": "build.defines", "parameters": "build.parameters",
               "build_args": "build.args"}
_TEST_KEYS = {"test_module": "tests.modules", "hdl_toplevel": "design.top", "test_dir": "tests.dir",
              "testcase": "tests.filter", "test_filter": "tests.filter", "seed": "tests.random_seed",
              "extra_env": "tests.env", "parameters": "build.parameters"}
#: Keywords that change nothing hwtp does (where the user's own flow builds, logs, waves...).
_IGNORED = {"hdl_library", "always", "build_dir", "cwd", "clean", "verbose", "timescale", "waves", "log_file",
            "hdl_toplevel_library", "hdl_toplevel_lang", "gpi_interfaces", "results_xml", "gui", "pre_cmd"}


class _NotUnderstood(Exception):
    def __init__(self, node: ast.AST, why: str) -> None:
        super().__init__(why)
        self.node = node
        self.why = why


@dataclass(frozen=True)
class _Failed:
    """A name whose assignment could not be evaluated: using it reports that assignment."""

    error: _NotUnderstood


class _Evaluator:
    """The small evaluator (see the module docstring); names resolve through ``scope``."""

    def __init__(self, script: Path, source: str, aliases: dict[str, str]) -> None:
        self.script = script
        self.source = source
        self.aliases = aliases  # local name -> dotted import path
        self.scope: dict[str, Any] = {"__file__": str(script)}

    def text(self, node: ast.AST) -> str:
        segment = ast.get_source_segment(self.source, node) or type(node).__name__
        segment = " ".join(segment.split())
        return segment if len(segment) <= 70 else segment[:67] + "..."

    def fail(self, node: ast.AST, why: str = "") -> _NotUnderstood:
        return _NotUnderstood(node, f"`{self.text(node)}`" + (f" ({why})" if why else ""))

    def dotted(self, node: ast.AST) -> str | None:
        """``os.path.join`` for a name or attribute chain, through the imports' aliases."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id) if node.id not in self.scope else None
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def assign(self, name: str, node: ast.AST) -> None:
        try:
            self.scope[name] = self.evaluate(node)
        except _NotUnderstood as exc:
            self.scope[name] = _Failed(exc)

    def evaluate(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.evaluate(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise self.fail(node, "a ** expansion")
            return {self.evaluate(k): self.evaluate(v) for k, v in zip(node.keys, node.values, strict=True) if k}
        if isinstance(node, ast.Name):
            if node.id not in self.scope:
                raise self.fail(node, "not assigned by a plain statement before this call")
            value = self.scope[node.id]
            if isinstance(value, _Failed):
                raise value.error
            return value
        if isinstance(node, ast.BinOp):
            return self.binop(node)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for part in node.values:
                if isinstance(part, ast.FormattedValue) and part.format_spec is None and part.conversion == -1:
                    parts.append(str(self.evaluate(part.value)))
                elif isinstance(part, ast.Constant):
                    parts.append(str(part.value))
                else:
                    raise self.fail(node, "a format specification")
            return "".join(parts)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Subscript):
            base = self.evaluate(node.value)
            index = self.evaluate(node.slice)
            if isinstance(base, (list, tuple)) and isinstance(index, int) and -len(base) <= index < len(base):
                return base[index]
            raise self.fail(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.ListComp):
            return self.comprehension(node)
        raise self.fail(node)

    def binop(self, node: ast.BinOp) -> Any:
        left, right = self.evaluate(node.left), self.evaluate(node.right)
        if isinstance(node.op, ast.Div) and isinstance(left, Path) and isinstance(right, (str, Path)):
            return left / right
        if isinstance(node.op, ast.Add) and type(left) is type(right) and isinstance(left, (str, list)):
            return left + right
        raise self.fail(node)

    def attribute(self, node: ast.Attribute) -> Any:
        base = self.evaluate(node.value)
        if isinstance(base, Path):
            if node.attr == "parents":
                return list(base.parents)
            if node.attr in ("parent", "name", "stem", "suffix"):
                return getattr(base, node.attr)
        raise self.fail(node)

    def call(self, node: ast.Call) -> Any:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.fail(node, "a * or ** expansion")
        name = self.dotted(node.func)
        function = _FUNCTIONS.get(name or "")
        if function is not None:
            args = [self.evaluate(a) for a in node.args]
            kwargs = {k.arg: self.evaluate(k.value) for k in node.keywords if k.arg}
            try:
                return function(*args, **kwargs)
            except (TypeError, ValueError) as exc:
                raise self.fail(node, str(exc)) from exc
        imported = isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id in self.aliases and node.func.value.id not in self.scope
        if isinstance(node.func, ast.Attribute) and not node.keywords and not imported:
            base = self.evaluate(node.func.value)
            method = node.func.attr
            if isinstance(base, Path) and method in ("resolve", "absolute") and not node.args:
                return Path(os.path.abspath(base))
            if isinstance(base, Path) and method == "joinpath":
                return base.joinpath(*(str(self.evaluate(a)) for a in node.args))
            if isinstance(base, Path) and method == "as_posix" and not node.args:
                return base.as_posix()
        raise self.fail(node, "a call hwtp does not evaluate")

    def comprehension(self, node: ast.ListComp) -> list[Any]:
        if len(node.generators) != 1:
            raise self.fail(node)
        gen = node.generators[0]
        if gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name):
            raise self.fail(node)
        items = self.evaluate(gen.iter)
        if not isinstance(items, list):
            raise self.fail(node)
        saved = self.scope.get(gen.target.id, _MISSING)
        out = []
        try:
            for item in items:
                self.scope[gen.target.id] = item
                out.append(self.evaluate(node.elt))
        finally:
            if saved is _MISSING:
                self.scope.pop(gen.target.id, None)
            else:
                self.scope[gen.target.id] = saved
        return out


_MISSING = object()


def _path(*parts: Any) -> Path:
    return Path(*(str(p) for p in parts)) if parts else Path()


def _env_default(name: Any, default: Any = None) -> Any:
    if not isinstance(name, str):
        raise ValueError("expected a variable name")
    return default


def _join(*parts: Any) -> str:
    return os.path.join(*(str(p) for p in parts))


def _tagged(path: Any) -> Any:
    return path  # cocotb_tools.runner.Verilog("x.sv"): the path


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    **{name: _path for name in ("Path", "pathlib.Path", "PurePath", "pathlib.PurePath")},
    "os.path.join": _join,
    "os.path.dirname": lambda p: os.path.dirname(str(p)),
    "os.path.abspath": lambda p: os.path.abspath(str(p)),
    "os.path.realpath": lambda p: os.path.abspath(str(p)),
    "os.path.basename": lambda p: os.path.basename(str(p)),
    "os.path.splitext": lambda p: list(os.path.splitext(str(p))),
    "str": lambda v="": str(v),
    "os.getenv": _env_default,
    "os.environ.get": _env_default,
    **{f"{module}.{tag}": _tagged for module in ("cocotb_tools.runner", "cocotb.runner")
       for tag in ("Verilog",)},
}


def _aliases(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _is_get_runner(ev: _Evaluator, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (ev.dotted(node.func) or "").endswith("get_runner")


@dataclass(frozen=True)
class _Calls:
    build: ast.Call | None
    test: ast.Call | None
    get_runner: ast.Call | None
    function: ast.FunctionDef | None
    more: int  # further build calls, not used


def _runner_calls(ev: _Evaluator, tree: ast.Module) -> _Calls:
    """The first build and test calls on a runner, the function that holds them."""
    runners: set[str] = set()
    made: ast.Call | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_get_runner(ev, node.value):
            runners.update(t.id for t in node.targets if isinstance(t, ast.Name))
            made = made or node.value  # type: ignore[assignment]
    scopes: list[tuple[ast.FunctionDef | None, ast.AST]] = [(None, tree)]
    scopes += [(f, f) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)]
    found: dict[str, list[tuple[ast.Call, ast.FunctionDef | None]]] = {"build": [], "test": []}
    for function, scope in scopes:
        body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef)) else []
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef) and function is None:
                continue  # module level: functions are scopes of their own
            for node in ast.walk(stmt):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in found):
                    continue
                receiver = node.func.value
                if (isinstance(receiver, ast.Name) and receiver.id in runners) or _is_get_runner(ev, receiver):
                    if _is_get_runner(ev, receiver):
                        made = made or receiver  # type: ignore[assignment]
                    found[node.func.attr].append((node, function))
    builds = sorted(found["build"], key=lambda c: c[0].lineno)
    tests = sorted(found["test"], key=lambda c: c[0].lineno)
    build = builds[0] if builds else None
    test = tests[0] if tests else None
    holder = (build or test or (None, None))[1]
    return _Calls(build[0] if build else None, test[0] if test else None, made, holder, max(0, len(builds) - 1))


def _bind_scope(ev: _Evaluator, body: list[ast.stmt], stop: int) -> None:
    """Evaluate the plain assignments of ``body`` before line ``stop``, in order."""
    for stmt in body:
        if stmt.lineno >= stop:
            break
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    ev.assign(target.id, stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            ev.assign(stmt.target.id, stmt.value)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            ev.assign(stmt.target.id, ast.BinOp(ast.Name(stmt.target.id, ast.Load()), stmt.op, stmt.value,
                                                lineno=stmt.lineno, col_offset=stmt.col_offset,
                                                end_lineno=stmt.end_lineno, end_col_offset=stmt.end_col_offset))
        elif isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            for node in ast.walk(stmt):  # names assigned in blocks: unknown, reported when used
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            ev.scope[target.id] = _Failed(ev.fail(node, "assigned inside a block"))


def _function_defaults(ev: _Evaluator, function: ast.FunctionDef) -> None:
    args = function.args.args
    defaults = function.args.defaults
    for arg in args[: len(args) - len(defaults)]:
        ev.scope[arg.arg] = _Failed(_NotUnderstood(function, f"`{arg.arg}`, an argument of {function.name}()"))
    for arg, default in zip(args[len(args) - len(defaults):], defaults, strict=True):
        ev.assign(arg.arg, default)


class _Reader:
    """The keywords of one call, evaluated, with what could not be."""

    def __init__(self, ev: _Evaluator, rel: str) -> None:
        self.ev = ev
        self.rel = rel
        self.unknown: list[Unknown] = []
        self.notes: list[str] = []

    def keywords(self, call: ast.Call | None, keys: dict[str, str], what: str) -> dict[str, Any]:
        if call is None:
            return {}
        out: dict[str, Any] = {}
        for i, arg in enumerate(call.args):
            name = {"test": ("test_module", "hdl_toplevel")}.get(what, ())
            if i < len(name):
                out.update(self.one(name[i], arg, keys))
            else:
                self.notes.append(f"{self.rel}:{call.lineno}: runner.{what}: positional argument {i + 1} not read")
        for kw in call.keywords:
            if kw.arg is None:
                self.unknown.append(Unknown(self.rel, call.lineno, f"`**{self.ev.text(kw.value)}` in runner.{what}",
                                            "the keys it sets"))
            elif kw.arg in keys:
                out.update(self.one(kw.arg, kw.value, keys))
            elif kw.arg not in _IGNORED:
                self.notes.append(f"{self.rel}:{kw.value.lineno}: runner.{what}({kw.arg}=...) is not used by hwtp ci")
        return out

    def one(self, key: str, node: ast.AST, keys: dict[str, str]) -> dict[str, Any]:
        try:
            return {key: self.ev.evaluate(node)}
        except _NotUnderstood as exc:
            line = getattr(exc.node, "lineno", getattr(node, "lineno", 0))
            self.unknown.append(Unknown(self.rel, line, f"{key}={exc.why} is not understood", keys[key]))
            return {}

    def expect(self, value: Any, kind: type | tuple[type, ...], key: str, line: int, yaml_key: str) -> bool:
        if isinstance(value, kind):
            return True
        self.unknown.append(Unknown(self.rel, line, f"{key} is not a {getattr(kind, '__name__', 'value')} "
                                    f"({type(value).__name__})", yaml_key))
        return False


def _paths(value: Any) -> list[Path] | None:
    if isinstance(value, (str, Path)):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, Path)) for v in value):
        return None
    return [Path(v) for v in value]


def _pairs(value: Any) -> list[tuple[str, str]] | None:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return None
    if not all(isinstance(v, (str, int, float, bool)) or v is None for v in value.values()):
        return None
    return [(k, "" if v is None else str(v)) for k, v in value.items()]


def _names(value: Any) -> list[str] | None:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


def _filter(value: Any, key: str) -> str | None:
    if key == "test_filter":
        return value if isinstance(value, str) else None
    names = _names(value)  # testcase: names, as cocotb's runner turns them into a filter
    if not names:
        return None
    return r"\.(" + "|".join(rf".*{re.escape(n)}" for n in names) + ")$"


def is_runner_script(text: str) -> bool:
    """Whether a Python file looks like a cocotb runner script (worth parsing)."""
    return "get_runner" in text and ("cocotb_tools" in text or "cocotb.runner" in text)


def read_runner_script(script: Path, root: Path) -> Detected | None:
    """What the runner script ``script`` (under the project folder ``root``) builds and tests;
    None when it calls no ``runner.build``/``runner.test``."""
    source = script.read_text(encoding="utf-8", errors="replace")
    rel = script.relative_to(root).as_posix() if script.is_relative_to(root) else str(script)
    try:
        tree = ast.parse(source, filename=rel)
    except SyntaxError as exc:
        return Detected(rel, unknown=(Unknown(rel, exc.lineno or 0, f"not valid Python: {exc.msg}", "every key"),))
    ev = _Evaluator(script.resolve(), source, _aliases(tree))
    calls = _runner_calls(ev, tree)
    if calls.build is None and calls.test is None:
        return None
    first = min(c.lineno for c in (calls.build, calls.test) if c is not None)
    _bind_scope(ev, tree.body, first if calls.function is None else calls.function.lineno)
    if calls.function is not None:
        _function_defaults(ev, calls.function)
        _bind_scope(ev, calls.function.body, first)
    reader = _Reader(ev, rel)
    found = _Found(script, root, calls, reader, reader.keywords(calls.build, _BUILD_KEYS, "build"),
                   reader.keywords(calls.test, _TEST_KEYS, "test"))
    fields = {**found.design(), **found.build_fields(), **found.tests(), **found.simulator(), **found.paths()}
    return Detected(rel, unknown=tuple(reader.unknown), notes=tuple(reader.notes), **fields)


class _Found:
    """The fields of :class:`Detected` from a script's evaluated ``runner.build`` and
    ``runner.test`` keywords, a method per group (called in the order their TODOs are told)."""

    def __init__(self, script: Path, root: Path, calls: _Calls, reader: _Reader,
                 build: dict[str, Any], test: dict[str, Any]) -> None:
        self.script, self.root, self.calls, self.reader = script, root, calls, reader
        self.build, self.test = build, test
        self.line_b = calls.build.lineno if calls.build else 0
        self.line_t = calls.test.lineno if calls.test else 0
        self.modules: tuple[str, ...] = ()

    def _todo(self, line: int, what: str, key: str) -> None:
        self.reader.unknown.append(Unknown(self.reader.rel, line, what, key))

    def design(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        build, rel = self.build, self.reader.rel
        sources = build.get("sources", build.get("verilog_sources"))
        if sources is not None:
            paths = _paths(sources)
            if paths is None:
                self._todo(self.line_b, "sources is not a list of paths", "design.sources")
            else:
                vhdl = [p for p in paths if p.suffix in (".vhd", ".vhdl")]
                if vhdl:
                    self.reader.notes.append(f"{rel}:{self.line_b}: VHDL sources ({vhdl[0].name}...) are left out: "
                                             "hwtp mutates Verilog and SystemVerilog")
                out["sources"] = tuple((self.script.parent / p).resolve() for p in paths if p not in vhdl)
        elif self.calls.build is not None and not any(u.key == "design.sources" for u in self.reader.unknown):
            self._todo(self.line_b, "runner.build has no sources", "design.sources")
        top = build.get("hdl_toplevel", self.test.get("hdl_toplevel"))
        if top is not None and self.reader.expect(top, str, "hdl_toplevel", self.line_b or self.line_t, "design.top"):
            out["top"] = top
        return out

    def build_fields(self) -> dict[str, Any]:
        """Include folders, defines, parameters (runner.test's override runner.build's) and the
        other build arguments."""
        out: dict[str, Any] = {}
        conversions: tuple[tuple[str, str, Callable[[Any], list[Any] | None], str], ...] = (
            ("includes", "build.includes", _paths, "includes"),
            ("defines", "build.defines", _pairs, "defines"),
            ("parameters", "build.parameters", _pairs, "parameters"),
            ("build_args", "build.args", _names, "args"))
        for key, yaml_key, convert, name in conversions:
            if key in self.build:
                value = convert(self.build[key])
                if value is None:
                    self._todo(self.line_b, f"{key} has a value hwtp cannot use", yaml_key)
                elif name == "includes":
                    out[name] = tuple((self.script.parent / p).resolve() for p in value)
                else:
                    out[name] = tuple(value)
        if "parameters" in self.test:
            overrides = _pairs(self.test["parameters"])
            if overrides is not None:
                merged = dict(out.get("parameters", ()))
                merged.update(overrides)
                out["parameters"] = tuple(merged.items())
        return out

    def tests(self) -> dict[str, Any]:
        """Test modules, their folder, which tests run, the seed and the environment."""
        out: dict[str, Any] = {}
        test, line_t = self.test, self.line_t
        if "test_module" in test:
            modules = _names(test["test_module"])
            if modules is None:
                self._todo(line_t, "test_module is not a module name or a list of them", "tests.modules")
            else:
                out["modules"] = self.modules = tuple(modules)
        elif self.calls.test is not None and not any(u.key == "tests.modules" for u in self.reader.unknown):
            self._todo(line_t, "runner.test has no test_module", "tests.modules")
        if "test_dir" in test and self.reader.expect(test["test_dir"], (str, Path), "test_dir", line_t, "tests.dir"):
            out["test_dir"] = (self.script.parent / Path(test["test_dir"])).resolve()
        for key in ("testcase", "test_filter"):
            if key in test and test[key] is not None:
                regex = _filter(test[key], key)
                if regex is None:
                    self._todo(line_t, f"{key} is not a name or list of names", "tests.filter")
                else:
                    out["test_filter"] = regex
        if "seed" in test:
            seed = test["seed"]
            if isinstance(seed, str) and seed.isdigit():
                seed = int(seed)
            if isinstance(seed, int) and not isinstance(seed, bool):
                out["random_seed"] = seed
            elif seed is not None:
                self._todo(line_t, "seed is not an integer", "tests.random_seed")
        if "extra_env" in test:
            env = _pairs(test["extra_env"])
            if env is None:
                self._todo(line_t, "extra_env is not a mapping of strings", "tests.env")
            else:
                out["env"] = tuple(env)
        return out

    def simulator(self) -> dict[str, Any]:
        """The simulator ``get_runner`` names (and a note on build calls that are not read)."""
        out: dict[str, Any] = {}
        rel, get_runner = self.reader.rel, self.calls.get_runner
        if get_runner is not None and get_runner.args:
            try:
                sim = self.reader.ev.evaluate(get_runner.args[0])
            except _NotUnderstood:
                sim = None
            if sim in SIMULATORS:
                out["simulator"] = sim
            elif isinstance(sim, str):
                self.reader.notes.append(f"{rel}:{get_runner.lineno}: the script's simulator is {sim}; "
                                         "hwtp ci builds with Verilator (build.simulator)")
        if self.calls.more:
            self.reader.notes.append(f"{rel}: {self.calls.more} more runner.build call(s): only the first "
                                     f"(line {self.line_b}) is used")
        return out

    def paths(self) -> dict[str, Any]:
        """Where Python finds the test modules (a module found nowhere is a TODO)."""
        script_dir = self.script.resolve().parent
        module_paths = tuple(dict.fromkeys((script_dir, pytest_base(script_dir), self.root.resolve())))
        for module in self.modules:
            if module_folder(module, module_paths) is None:
                self._todo(self.line_t, f"test module {module!r} is not found next to the script or in the "
                                        "project folder", "tests.paths")
        return {"module_paths": module_paths}
