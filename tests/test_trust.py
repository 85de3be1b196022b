"""The RTL trust check sees what each simulator compiles: its own preprocessor, its predefined
macros, the configuration's defines, every include, and the code it passes through to C++."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from hwtp.errors import DesignError
from hwtp.rtl.design import SourceFile, check_trusted, load_design
from hwtp.rtl.frontend import BuildOptions
from hwtp.rtl.trust import scan

Run = Callable[..., tuple[int, str, str]]
HEAD = "module t(input wire [3:0] a, output wire [3:0] y);\n  assign y = a;\n"
PLAN = "tests:\n  - name: t0\n    steps:\n      - drive: {a: 3}\n      - expect: {y: 3}\n"


@pytest.fixture(autouse=True)
def _untrusted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HWTP_ALLOW_SYSTEM_TASKS", raising=False)


def rtl(body: str) -> str:
    return f"{HEAD}{body}endmodule\n"


@pytest.mark.sim
def test_the_issue_reproduction_never_runs(tmp_path: Path, run_cli: Run) -> None:
    """`ifdef VERILATOR hid $system from a check that read the RTL without Verilator's macros."""
    pwned = tmp_path / "pw"
    design = tmp_path / "t.v"
    design.write_text(rtl(f'`ifdef VERILATOR\n  initial $system("touch {pwned}");\n`endif\n'))
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN)
    code, _out, err = run_cli("sim", design, plan, "--top", "t", "--clock", "none")
    assert code == 2, err
    assert f"{design}:4: $system runs a shell command" in err and "Traceback" not in err
    assert not pwned.exists()
    assert run_cli("sim", design, plan, "--top", "t", "--clock", "none", "--allow-system-tasks")[0] == 0
    assert pwned.exists()  # the opt-in still works, and the file is made by the simulator


# (body, line, construct): each a way text reaches the compiler that a plain pyslang read missed.
VERILATOR_BYPASSES = [
    ('`ifdef VERILATOR\n  initial $system("x");\n`endif\n', 4, "$system"),
    ('`ifndef SYNTHESIS\n  initial $system("x");\n`endif\n', 4, "$system"),
    ('`ifdef SV_COV_START\n  initial $system("x");\n`endif\n', 4, "$system"),  # another Verilator predefine
    ('`ifdef VERILATOR\n  initial $c("system(\\"x\\");");\n`endif\n', 4, "$c runs C++"),
    ('`ifdef VERILATOR\n  initial $c32("system(0)");\n`endif\n', 4, "$c32 runs C++"),
    ('`ifdef VERILATOR\n  integer f;\n  initial f = $fopen("x", "w");\n`endif\n', 5, "$fopen"),
    ('`ifdef VERILATOR\n  reg [3:0] m [0:1];\n  initial $writememh("x", m);\n`endif\n', 5, "$writememh"),
    ('`ifdef VERILATOR\n  initial $dumpfile("x.vcd");\n`endif\n', 4, "$dumpfile"),
    ("`ifdef VERILATOR\n  initial $dumpvars;\n`endif\n", 4, "$dumpvars"),
    ('`ifdef VERILATOR\n  import "DPI-C" function int system(input string c);\n`endif\n', 4, 'import "DPI-C"'),
    (
        '`ifdef VERILATOR\n  export "DPI-C" function f;\n  function int f(); return 0; endfunction\n`endif\n',
        4,
        'export "DPI-C"',
    ),
    (
        '`ifdef VERILATOR\n`systemc_header\n#include <cstdlib>\nstatic int x = system("x");\n`verilog\n`endif\n',
        4,
        "`systemc_header pastes C++",
    ),
    ('`ifdef VERILATOR\n`systemc_ctor\nsystem("x");\n`verilog\n`endif\n', 4, "`systemc_ctor pastes C++"),
    ("`ifdef VERILATOR\n`systemc_interface\nint x;\n`verilog\n`endif\n", 4, "`systemc_interface"),
    ("`ifdef VERILATOR\n`systemc_imp_header\n`verilog\n`endif\n", 4, "`systemc_imp_header"),
    ("`ifdef VERILATOR\n`systemc_implementation\n`verilog\n`endif\n", 4, "`systemc_implementation"),
    ("`ifdef VERILATOR\n`systemc_dtor\n`verilog\n`endif\n", 4, "`systemc_dtor"),
    ("`ifdef VERILATOR\n`verilator_config\nlint_off\n`verilog\n`endif\n", 4, "`verilator_config"),
    ("  // verilator xyzzy\n", 3, "/*verilator xyzzy*/ is a Verilator metacomment"),
    ("`pragma protect begin\n  wire p;\n`pragma protect end\n", 3, "`pragma protect"),
    ('`define CAT(a, b) a``b\n  initial `CAT($sys, tem)("x");\n', 4, "$system"),  # a name pasted together
    ('`line 1 "/dev/null" 0\n  initial $system("x");\n', 1, "$system"),  # `line moves the message, not the check
]


@pytest.mark.parametrize(
    ("body", "line", "construct"),
    VERILATOR_BYPASSES,
    ids=[f"{i}-{c.split()[0]}" for i, (_b, _l, c) in enumerate(VERILATOR_BYPASSES)],
)
def test_what_verilator_compiles_is_checked(tmp_path: Path, body: str, line: int, construct: str) -> None:
    design = tmp_path / "t.v"
    design.write_text(rtl(body))
    with pytest.raises(DesignError, match="--allow-system-tasks") as err:
        load_design(design)
    where = "/dev/null" if body.startswith("`line") else f"{design}"
    assert f"{where}:{line}: {construct}" in str(err.value)


@pytest.mark.parametrize(
    "body",
    [
        '`ifdef SYNTHESIS\n  initial $system("x");\n`endif\n',  # Verilator does not compile it
        '`ifdef __ICARUS__\n  initial $system("x");\n`endif\n',  # nor this
        '  initial $display("$system(\\"x\\") and `systemc_header in a string");\n',
        "  // $system in a comment; /*verilator public*/ is fine\n  wire w /*verilator public*/;\n",
        "  // verilator lint_off WIDTH\n  wire [1:0] n = 3'd7;\n  // verilator lint_on WIDTH\n",
        "  wire \\$system ;\n  assign \\$system = 1'b0;\n",  # an escaped identifier is a name
    ],
)
def test_what_is_not_compiled_or_is_only_text_is_accepted(tmp_path: Path, body: str) -> None:
    design = tmp_path / "t.v"
    design.write_text(rtl(body))
    assert load_design(design).top == "t"


def test_keywords_of_another_standard_hide_nothing(tmp_path: Path) -> None:
    design = tmp_path / "t.v"
    module = rtl('  initial $system("x");\n')
    design.write_text(f'`begin_keywords "1364-2001"\n{module}`end_keywords\n')
    with pytest.raises(DesignError, match=rf"{design}:4: \$system"):
        load_design(design)


def test_configured_defines_arguments_and_headers_count(tmp_path: Path) -> None:
    body = '`ifdef EVIL\n  initial $system("x");\n`endif\n'
    sources = (SourceFile("t.v", rtl(body)),)
    check_trusted(sources, tmp_path, "t")  # EVIL is not defined: nothing of it is compiled
    for options in (
        BuildOptions(defines=(("EVIL", "1"),)),
        BuildOptions(args=("+define+EVIL=1",)),
        BuildOptions(args=("-DEVIL",)),
        BuildOptions(includes=("inc",), headers=(SourceFile("inc/evil.vh", "`define EVIL 1\n"),)),
    ):
        src = sources if not options.headers else (SourceFile("t.v", '`include "evil.vh"\n' + rtl(body)),)
        with pytest.raises(DesignError, match=r"t\.v:\d+: \$system runs a shell command"):
            check_trusted(src, tmp_path, "t", options)


@pytest.mark.parametrize(
    "args",
    [
        ("-CFLAGS", "-include /tmp/x.h"),
        ("-LDFLAGS", "-lx"),
        ("evil.cpp",),
        ("-y", "lib"),
        ("-f", "more.f"),
        ("--exe",),
    ],
)
def test_build_arguments_that_bring_code_in_are_refused(tmp_path: Path, args: tuple[str, ...]) -> None:
    options = BuildOptions(args=args)
    with pytest.raises(DesignError, match=r"^\(build\.args\): .* brings code or files into the build"):
        check_trusted((SourceFile("t.v", rtl("")),), tmp_path, "t", options)


def test_the_build_key_holds_what_the_preprocessor_read(tmp_path: Path) -> None:
    """A file a build reads through its arguments (``-v lib.v``) is in its key: changing it is
    a new build, never a stale "cached build" (which a key of the sources alone gave)."""
    from hwtp.rtl import trust
    from hwtp.sim.backends import get_backend

    lib = tmp_path / "lib.v"
    lib.write_text("module lib(output wire [3:0] y); assign y = 4'd1; endmodule\n")
    options = BuildOptions(args=("-v", str(lib)))
    sources = (SourceFile("t.v", rtl("")),)
    verilator = get_backend("verilator")
    first = trust.check(verilator, sources, "t", options)
    lib.write_text("module lib(output wire [3:0] y); assign y = 4'd2; endmodule\n")
    trust._checked.clear()  # as a new process: nothing remembered
    assert trust.check(verilator, sources, "t", options) != first
    lib.write_text('module lib(output wire [3:0] y); initial $system("x"); assign y = 4\'d2; endmodule\n')
    trust._checked.clear()
    with pytest.raises(DesignError, match=r"\$system runs a shell command"):
        trust.check(verilator, sources, "t", options)


def test_timing_predefine_of_the_configured_flags(tmp_path: Path) -> None:
    body = '`ifdef VERILATOR_TIMING\n  initial $system("x");\n`endif\n'
    sources = (SourceFile("t.v", rtl(body)),)
    check_trusted(sources, tmp_path, "t")
    with pytest.raises(DesignError, match=r"t\.v:4: \$system"):
        check_trusted(sources, tmp_path, "t", BuildOptions(args=("--timing",)))


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not installed")
def test_what_icarus_compiles_is_checked(tmp_path: Path) -> None:
    body = '`ifdef __ICARUS__\n  initial $system("x");\n`endif\n'
    sources = (SourceFile("t.v", rtl(body)),)
    check_trusted(sources, tmp_path, "t")  # Verilator does not compile it
    with pytest.raises(DesignError, match=r"t\.v:4: \$system runs a shell command \(as icarus compiles it\)"):
        check_trusted(sources, tmp_path, "t", simulator="icarus")
    with pytest.raises(DesignError, match=r"t\.v:1: `include \"/etc/hostname\" reads a file outside"):
        check_trusted((SourceFile("t.v", '`include "/etc/hostname"\n' + rtl("")),), tmp_path, "t", simulator="icarus")


def test_an_include_from_outside_the_design_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Run
) -> None:
    outside = tmp_path / "elsewhere" / "x.vh"
    outside.parent.mkdir()
    outside.write_text("`define W 4\n")
    design = tmp_path / "d" / "t.v"
    design.parent.mkdir()
    design.write_text(
        f'`include "{outside}"\nmodule t(input wire [`W-1:0] a, output wire [3:0] y);\n  assign y = a;\nendmodule\n'
    )
    message = f'{design}:1: `include "{outside}" reads a file outside the design folder'
    with pytest.raises(DesignError, match=message):
        load_design(design)
    monkeypatch.setenv("HWTP_ALLOW_SYSTEM_TASKS", "1")  # trusting the RTL does not make its key cover the file
    with pytest.raises(DesignError, match=message):
        load_design(design)
    monkeypatch.delenv("HWTP_ALLOW_SYSTEM_TASKS")
    dotted = tmp_path / "d" / "u.v"
    dotted.write_text('`include "../elsewhere/x.vh"\n' + rtl("").replace("module t", "module u"))
    code, _out, err = run_cli("sim", dotted, "-", "--clock", "none")
    assert code == 2 and f"{dotted.name}:1:" in err and "Traceback" not in err  # never read into the build


def test_scan_follows_line_directives_and_skips_strings() -> None:
    text = '`line 7 "a.v" 0\n$display("$system");\n\n  $system("y"); /*verilator tag x*/ /*verilator sc_foo*/\n'
    found = scan(text)
    assert [(f.file, f.line, f.construct) for f in found] == [("a.v", 9, "$system"), ("a.v", 9, "/*verilator sc_foo*/")]


@pytest.mark.sim
def test_every_entry_point_refuses(tmp_path: Path, run_cli: Run) -> None:
    """hwtp mutate, designs import, ci (defines from hwtp.yaml) and scoring a mutant set whose
    mutants.json was edited to splice a call in: all refused before anything runs."""
    bad = rtl('`ifdef VERILATOR\n  initial $system("x");\n`endif\n')
    design = tmp_path / "t.v"
    design.write_text(bad)
    code, _o, err = run_cli("mutate", design, "-o", tmp_path / "m", "--clock", "none")
    assert code == 2 and "$system" in err and not (tmp_path / "m").exists()
    code, _o, err = run_cli("eval", design, "-o", tmp_path / "ev")
    assert code == 2 and f"{design}:4: $system" in err and not (tmp_path / "ev").exists()

    corpus = tmp_path / "corpus" / "t"
    corpus.mkdir(parents=True)
    (corpus / "t.v").write_text(bad)
    assert run_cli("designs", "import", corpus.parent, "-o", tmp_path / "imported")[0] == 0
    summary = json.loads((tmp_path / "imported" / "import.json").read_text())
    entry = next(iter(summary["designs"].values())) if isinstance(summary.get("designs"), dict) else summary
    assert "untrusted" in json.dumps(entry) and "$system" in json.dumps(entry)
    assert not (tmp_path / "imported" / "t").exists()

    project = tmp_path / "proj"
    project.mkdir()
    (project / "t.v").write_text(rtl('`ifdef EVIL\n  initial $system("x");\n`endif\n'))
    (project / "test_t.py").write_text("import cocotb\n\n@cocotb.test()\nasync def t(dut):\n    pass\n")
    (project / "hwtp.yaml").write_text(
        "design: {sources: [t.v], top: t}\ntests: {modules: [test_t]}\nbuild: {defines: {EVIL: 1}}\n"
    )
    code, _o, err = run_cli("ci", "--config", project)
    assert code == 2 and f"{project.resolve()}/t.v:4: $system" in err, err

    clean = tmp_path / "c.v"
    clean.write_text(rtl(""))
    mutdir = tmp_path / "cm"
    assert run_cli("mutate", clean, "-o", mutdir, "-n", "2", "--clock", "none")[0] == 0
    data = json.loads((mutdir / "mutants.json").read_text())
    for mutant in data["mutants"]:
        for edit in mutant["edits"]:
            edit["replacement"] = '(a); initial $system("x"); wire [3:0] z = (a)'
    (mutdir / "mutants.json").write_text(json.dumps(data))
    plans = tmp_path / "p.yaml"
    plans.write_text(PLAN)
    code, _o, err = run_cli("score", mutdir, "--plans", plans, "--json", tmp_path / "s.json")
    assert code == 2 and "$system runs a shell command" in err, err
    assert not (tmp_path / "s.json").exists()


@pytest.mark.sim
def test_a_mutant_id_cannot_name_a_path(tmp_path: Path, run_cli: Run) -> None:
    """A mutant id ``../esc`` in mutants.json made ``hwtp plan`` write outside -o."""
    design = tmp_path / "c.v"
    design.write_text(rtl(""))
    mutdir = tmp_path / "m"
    assert run_cli("mutate", design, "-o", mutdir, "-n", "2", "--clock", "none")[0] == 0
    data = json.loads((mutdir / "mutants.json").read_text())
    data["mutants"][0]["id"] = "../esc"
    (mutdir / "mutants.json").write_text(json.dumps(data))
    code, _o, err = run_cli("plan", mutdir, "-G", "1", "-o", tmp_path / "plans" / "out")
    assert code == 2 and "mutants[0].id: '../esc' is not a mutant id" in err and "Traceback" not in err
    assert not (tmp_path / "plans" / "esc").exists() and not (tmp_path / "plans").exists()


@pytest.mark.parametrize("name", ["my design.v", "a#b.v", "x$y.v"])
def test_a_source_name_a_build_cannot_take_is_refused(tmp_path: Path, run_cli: Run, name: str) -> None:
    """A file name with a space failed in make (exit 3): refused before any build (exit 2)."""
    design = tmp_path / name
    design.write_text(rtl(""))
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN)
    code, _o, err = run_cli("sim", design, plan, "--clock", "none")
    assert code == 2 and f"{name}: a source file name with" in err and "rename the file" in err, err
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / name).write_text(rtl(""))
    (folder / "design.yaml").write_text(f"name: t\ntop: t\nsources: ['{name}']\n")
    code, _o, err = run_cli("sim", folder, plan)
    assert code == 2 and "cannot be built" in err and "Traceback" not in err, err
