"""What Yosys reads: the formal sources and the script that checks many mutants at once.

The sources are the mutant schemata with the selector declared as a plain undriven wire
(``(* keep *) wire [31:0] hwtp_mutant_sel;``) instead of the simulator's plusarg register:
the design is read, elaborated and flattened once (``design -save``), then for each mutant
the script copies it twice, ties the selector wires of one copy to 0 (golden) and of the
other to the mutant's value, and builds a miter of their outputs. One Yosys process checks
every mutant; parsing and elaboration are paid once.

Initial state and reset (the harness's power-on, docs/plan-format.md): Verilator builds
with ``--x-initial 0 --x-assign 0``, so every register starts at 0 and every ``x`` the
design assigns is 0; the checker does the same (``sat -set-init-zero``, ``setundef
-zero``). A clocked step of the SAT model is one rising edge, outputs compared before it;
the first ``reset.cycles`` steps hold the reset port at its active level and every other
input at 0, as the harness's power-on reset does. After that every input is free,
the reset port included (a plan may reset again).

Checks per mutant (clocked designs):

1. bounded model check of the output miter for ``depth`` steps after the power-on reset
   (outputs are not compared during it: no plan can look at them then): a model is a
   counterexample (``killable`` once the simulator confirms it);
2. k-induction (``sat -tempinduct``, up to ``induction`` steps) on a stronger miter that
   also compares every register the two copies share (``expose -dff -shared``): "outputs
   and shared registers equal" proved inductive from power-on means equal forever
   (``equivalent``). The base case of this step carries no reset constraint (a superset of
   the traces a plan can produce), so a proof stays sound whatever the reset does.

A combinational design (no clock) needs one SAT call, which is a complete proof.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hwtp.mutators.mutantset import Mutant, MutantSet
from hwtp.mutators.schemata import SELECTOR, render, selector_declaration
from hwtp.rtl.design import Design, SourceFile
from hwtp.rtl.frontend import module_body_offsets
from hwtp.sim.backends import NO_OPTIONS, BuildOptions
from hwtp.sim.procs import backstop

#: The selector as Yosys sees it: a wire the script ties to a constant per copy.
SELECTOR_WIRE = f" (* keep *) wire [31:0] {SELECTOR};"
#: What the script prints before each mutant (the host watches it for the time limit).
BEGIN = "HWTP_BEGIN"
GOLD, MUT = "hwtp_gold", "hwtp_mut"


@dataclass(frozen=True)
class Bounds:
    """How far the checker looks."""

    depth: int = 20  # bounded-model-check steps (clock cycles) from power-on
    induction: int = 8  # longest k-induction tried
    timeout_s: float = 10.0  # CPU s per mutant (the host kills beyond it; hwtp.mutators.formal.yosys)


def unsupported(mutant: Mutant) -> str | None:
    """Why the checker cannot model ``mutant``, or None."""
    if any(s.guard == "edge" for s in mutant.sites):
        return (
            "a clock-edge mutant the drive/sample protocol does not settle (hwtp.mutators.formal.edges: its flip-flops "
            "read a rising-edge one, or the edge is not the clock's); the miter models one rising edge per step"
        )
    return None


def formal_sources(mutant_set: MutantSet, mutants: Sequence[Mutant]) -> tuple[SourceFile, ...]:
    """The schemata of ``mutants`` (their own selector values) with the selector as a wire."""
    out = []
    for src in mutant_set.design.sources:
        pairs = [(m.index, s) for m in mutants for s in m.sites if s.file == src.path]
        text = render(src.text, pairs, module_body_offsets(src.text, src.path))
        out.append(SourceFile(src.path, text.replace(selector_declaration(), SELECTOR_WIRE)))
    return tuple(out)


def _read(design: Design, files: Sequence[str], build: BuildOptions) -> list[str]:
    chparam = " ".join(f"-chparam {name} {value}" for name, value in build.parameters)
    return [*_sources(files, build), f"hierarchy -check -top {design.top} {chparam}".rstrip(), *_ELABORATE]


def _sources(files: Sequence[str], build: BuildOptions) -> list[str]:
    defines = " ".join(f"-D{name}={value}" if value else f"-D{name}" for name, value in build.defines)
    return [f"read_verilog -sv {defines} {_quote(f)}".replace("  ", " ") for f in files]


#: After the hierarchy: processes to netlists, one flat module, memories to flip-flops, an
#: asynchronous reset as the value it forces within the step (async2sync).
_ELABORATE = ("proc", "flatten", "memory", "async2sync", "opt_clean")


def _quote(path: str) -> str:
    """Yosys takes file names as they are (no quoting): the paths hwtp writes have no spaces."""
    if any(c.isspace() for c in path):
        raise ValueError(f"a path with white space cannot be given to Yosys: {path!r}")
    return path


def prepare_script(design: Design, files: Sequence[str], out: str, build: BuildOptions = NO_OPTIONS) -> str:
    """Read and elaborate once; list the selector wires (``out.sel``) and the flip-flops on a
    falling clock edge (``out.neg``), which the checker cannot model. (A latch a mutant
    leaves stops ``sat`` on that mutant alone: unknown, with Yosys' message.)"""
    return "\n".join(
        [
            *_read(design, files, build),
            f"tee -q -o {_quote(out + '.sel')} select -list w:*{SELECTOR}",
            f"tee -q -o {_quote(out + '.neg')} select -list r:CLK_POLARITY=1'0",
            "",
        ]
    )


def elaborated_json_script(design: Design, files: Sequence[str], out: str, build: BuildOptions = NO_OPTIONS) -> str:
    """Read and elaborate ``files`` as the checks do, and write the netlist as JSON (``out``)."""
    return "\n".join([*_read(design, files, build), f"write_json {_quote(out)}", ""])


def _constraints(design: Design) -> str:
    """``-set-at`` options for the power-on reset: reset active, other inputs 0."""
    if design.clock is None or design.reset is None:
        return ""
    reset = design.reset
    level = 1 if reset.active == "high" else 0
    parts = []
    for t in range(1, reset.cycles + 1):
        parts.append(f"-set-at {t} in_{reset.port} {level}")
        parts += [f"-set-at {t} in_{p.name} 0" for p in design.inputs if p.name not in design.control_ports]
    return " ".join(parts)


def check_script(
    design: Design,
    files: Sequence[str],
    selectors: Sequence[str],
    targets: Sequence[tuple[str, int]],
    bounds: Bounds,
    logs: str,
    build: BuildOptions = NO_OPTIONS,
) -> str:
    """The script that checks every ``(tag, selector value)`` of ``targets``; each check
    writes ``{logs}/{tag}.bmc`` (and ``.ind`` for a clocked design)."""
    lines = [*_read(design, files, build), "design -save hwtp_base"]
    for tag, index in targets:
        lines += [
            f"log -stdout {BEGIN} {tag}",
            "design -load hwtp_base",
            f"copy {design.top} {GOLD}",
            f"rename {design.top} {MUT}",
        ]
        for module, value in ((GOLD, 0), (MUT, index)):
            lines += [f"cd {module}", *(f"connect -set {w} 32'd{value}" for w in selectors), "cd .."]
        lines += _checks(design, tag, bounds, logs)
    lines.append(f"log -stdout {BEGIN} end")
    return "\n".join(lines) + "\n"


def standalone_script(
    design: Design,
    golden: Sequence[str],
    mutant: Sequence[str],
    tag: str,
    bounds: Bounds,
    logs: str,
    build: BuildOptions = NO_OPTIONS,
) -> str:
    """The same checks for one mutant from its standalone source (golden with one splice),
    for a mutant whose schemata guard Yosys cannot elaborate (around an asynchronous reset).
    Golden is elaborated and stashed apart, so module names never clash."""
    return "\n".join(
        [
            f"log -stdout {BEGIN} {tag}",
            *_read(design, golden, build),
            f"rename {design.top} {GOLD}",
            "design -stash hwtp_golden",
            *_read(design, mutant, build),
            f"rename {design.top} {MUT}",
            f"design -copy-from hwtp_golden -as {GOLD} {GOLD}",
            *_checks(design, tag, bounds, logs),
            f"log -stdout {BEGIN} end",
            "",
        ]
    )


def _checks(design: Design, tag: str, bounds: Bounds, logs: str) -> list[str]:
    """The bounded check and the induction of one mutant, on modules GOLD and MUT."""
    # sat -timeout is an alarm on the wall clock: it gets the backstop, the host counts the CPU limit
    timeout = math.ceil(backstop(bounds.timeout_s))
    clocked = design.clock is not None
    # x and undriven bits are 0 (as Verilator's --x-assign 0) before anything folds them
    # (opt_expr -full would pick a mux's other input for an x); then the other mutants'
    # logic folds away (a smaller SAT problem); x bits the folding made are 0 too
    lines = ["setundef -zero -undriven", "setundef -zero"]
    lines += ["opt_expr -full", "opt_merge", "opt_expr -full", "opt_clean", "setundef -zero"]
    lines.append(f"miter -equiv -flatten -make_outputs {GOLD} {MUT} hwtp_miter")
    skip = design.reset.cycles if design.reset is not None else 0
    # a combinational design: one step (-seq 1 only for the model table's time column)
    bmc = "-seq 1 "
    if clocked:
        bmc = f"-seq {bounds.depth + skip} -prove-skip {skip} {_constraints(design)} -set-init-zero "
    lines.append(
        f"tee -q -o {_quote(f'{logs}/{tag}.bmc')} sat {bmc}-prove trigger 0 -show-inputs -show-outputs "
        f"-timeout {timeout} hwtp_miter"
    )
    if clocked:
        lines += [
            f"expose -dff -shared {GOLD} {MUT}",
            f"miter -equiv -flatten -make_outputs {GOLD} {MUT} hwtp_induct",
            f"tee -q -o {_quote(f'{logs}/{tag}.ind')} sat -tempinduct -prove trigger 0 -set-init-zero "
            f"-maxsteps {bounds.induction} -timeout {timeout} hwtp_induct",
        ]
    return lines


def aiger_script(
    design: Design,
    files: Sequence[str],
    selectors: Sequence[str],
    index: int,
    out: str,
    build: BuildOptions = NO_OPTIONS,
) -> str:
    """The miter of golden and the mutant with selector value ``index`` as an AIGER model
    (``out``) whose bad state is "an output differs after the power-on reset", for an
    unbounded engine such as ABC's ``pdr``: see :func:`_aiger`."""
    lines = [*_read(design, files, build), f"copy {design.top} {GOLD}", f"rename {design.top} {MUT}"]
    for module, value in ((GOLD, 0), (MUT, index)):
        lines += [f"cd {module}", *(f"connect -set {w} 32'd{value}" for w in selectors), "cd .."]
    return "\n".join([*lines, *_aiger(design, out), ""])


def standalone_aiger_script(
    design: Design, golden: Sequence[str], mutant: Sequence[str], out: str, build: BuildOptions = NO_OPTIONS
) -> str:
    """:func:`aiger_script` for a mutant checked from its standalone source."""
    lines = [
        *_read(design, golden, build),
        f"rename {design.top} {GOLD}",
        "design -stash hwtp_golden",
        *_read(design, mutant, build),
        f"rename {design.top} {MUT}",
        f"design -copy-from hwtp_golden -as {GOLD} {GOLD}",
    ]
    return "\n".join([*lines, *_aiger(design, out), ""])


#: The module around the miter that models the harness's power-on reset for ``pdr``.
POWER_ON = "hwtp_power_on"


def _power_on(design: Design) -> str:
    """Verilog of :data:`POWER_ON`: the miter's inputs as ports; a counter (from 0) holds the
    reset port active and every other input at 0 for the first ``reset.cycles`` steps, as the
    harness's power-on does (the bounded check's constraints, :func:`_constraints`), and the
    property "no output differs" is asserted after them. From then on every input is free,
    the reset port included (a plan may reset again); the property is not asserted while the
    reset port is active (no plan samples the outputs then: a ``reset`` step samples after
    releasing it)."""
    assert design.clock is not None
    cycles = design.reset.cycles if design.reset is not None else 0
    width = max(1, cycles.bit_length())
    ports = ", ".join(f"input [{p.width - 1}:0] {p.name}" for p in design.inputs)
    held = "hwtp_held"
    conns = []
    active = ""
    if design.reset is not None:
        level = "" if design.reset.active == "high" else "!"
        active = f" && !({level}{design.reset.port})"
    for p in design.inputs:
        if p.name == design.clock.port:
            value = p.name
        elif design.reset is not None and p.name == design.reset.port:
            value = f"({held} ? 1'b{1 if design.reset.active == 'high' else 0} : {p.name})"
        else:
            value = f"({held} ? {p.width}'d0 : {p.name})"
        conns.append(f".in_{p.name}({value})")
    return "\n".join(
        [
            f"module {POWER_ON}({ports});",
            f"  reg [{width - 1}:0] hwtp_count;",
            f"  wire {held} = hwtp_count < {width}'d{cycles};",
            f"  always @(posedge {design.clock.port}) if ({held}) hwtp_count <= hwtp_count + {width}'d1;",
            "  wire hwtp_trigger;",
            f"  hwtp_pdr hwtp_miter_inst({', '.join([*conns, '.trigger(hwtp_trigger)'])});",
            f"  always @* if (!{held}{active}) assert (!hwtp_trigger);",
            "endmodule",
        ]
    )


def _aiger(design: Design, out: str) -> list[str]:
    """From modules GOLD and MUT: the AIGER model ``out`` for ``pdr``. Registers start at 0, x
    is 0; the power-on reset is the model's start (:func:`_power_on`), so a proof holds for
    every plan, which always starts with it."""
    return [
        "setundef -zero -undriven",
        "setundef -zero",
        "opt_expr -full",
        "opt_clean",
        "setundef -zero",
        f"miter -equiv -flatten {GOLD} {MUT} hwtp_pdr",
        "read_verilog -formal <<HWTP_EOT",
        _power_on(design),
        "HWTP_EOT",
        f"hierarchy -top {POWER_ON}",
        "proc",
        "flatten",
        "techmap",
        "opt -fast",
        "dffunmap",
        "abc -g AND -fast",
        "opt_clean",
        "setundef -zero -init",  # every register's initial value 0 (else -zinit leaves it free)
        f"write_aiger -zinit {_quote(out)}",
    ]
