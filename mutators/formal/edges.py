"""Clock-edge mutants (``posedge clk`` made ``negedge clk``) proved equivalent under hwtp's
drive and sample protocol, where that holds.

The protocol (docs/plan-format.md, ``hwtp.sim.plan_steps``): a test stands a quarter period
after a falling edge, in the low phase; it drives inputs and samples outputs only there, and
``wait``/``reset`` move it a whole number of periods, past one rising and one falling edge
each. So at the falling edge every top-level input still holds what it held at the rising
edge before it, and every sample comes after both.

Claim: if the mutant's falling-edge flip-flops (those the mutation moved to the design's
clock's falling edge) compute their next values from top-level inputs, constants and their
own outputs only (through combinational logic, no rising-edge flip-flop in the cone, no
latch anywhere), no plan tells the mutant from golden. By induction over the periods: at
falling edge k they read the same inputs and their own values as golden's flip-flops read at
rising edge k, so they take the same values, half a period later; every rising-edge
flip-flop at rising edge k+1 reads them holding what golden's held just before that edge;
every sample, in the low phase, sees the same registers and inputs. A rising-edge flip-flop
in the cone breaks the claim (the falling edge reads its new value, the rising edge its old
one): such a mutant stays ``unknown``.

The cone is read from Yosys' elaboration of the mutant's standalone source
(``write_json``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hwtp.mutators.formal import yosys
from hwtp.mutators.formal.miter import elaborated_json_script
from hwtp.mutators.mutantset import Mutant
from hwtp.rtl.design import Design
from hwtp.sim.backends import NO_OPTIONS, BuildOptions

#: Yosys cells that hold state without a clock edge: the claim does not cover them.
_LATCHES = re.compile(r"^\$(_?dlatch|adlatch|dlatchsr|sr|_SR_|_DLATCH)", re.IGNORECASE)


def on_the_clock(design: Design, mutant: Mutant) -> bool:
    """Whether ``mutant`` only turns ``posedge`` into ``negedge`` in front of the design's
    clock port (not a reset's edge, not a derived clock)."""
    if design.clock is None or not mutant.sites:
        return False
    texts = {s.path: s.text.encode() for s in design.sources}
    for site in mutant.sites:
        if site.guard != "edge" or site.original != "posedge" or site.standalone != "negedge":
            return False
        after = texts.get(site.file, b"")[site.end : site.guard_end].decode(errors="replace")
        if not re.fullmatch(rf"\s*\(?\s*{re.escape(design.clock.port)}\s*\)?\s*", after):
            return False
    return True


def _bits(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def reads_only_inputs_and_itself(netlist: dict[str, Any], top: str, clock: str) -> bool:
    """Whether, in ``top`` of Yosys' JSON ``netlist``, some flip-flop is clocked on the falling
    edge of ``clock`` and every falling-edge flip-flop's inputs (but its clock) depend only on
    top-level inputs other than the clock, constants and falling-edge flip-flops, with no
    latch in the module."""
    module = netlist.get("modules", {}).get(top)
    if not module:
        return False
    ports = module.get("ports", {})
    clock_bits = _bits(ports.get(clock, {}).get("bits"))
    inputs = {
        b for name, p in ports.items() if p.get("direction") == "input" and name != clock for b in _bits(p.get("bits"))
    }
    driver: dict[Any, tuple[str, dict[str, Any]]] = {}
    falling: list[dict[str, Any]] = []
    for name, cell in module.get("cells", {}).items():
        kind = str(cell.get("type", ""))
        if _LATCHES.match(kind):
            return False
        directions = cell.get("port_directions", {})
        for port, bits in cell.get("connections", {}).items():
            if directions.get(port) == "output":
                for b in _bits(bits):
                    driver[b] = (name, cell)
        if "CLK_POLARITY" in cell.get("parameters", {}):
            if int(str(cell["parameters"]["CLK_POLARITY"]), 2) == 0:
                if _bits(cell["connections"].get("CLK")) != clock_bits:
                    return False
                falling.append(cell)
        elif "CLK" in cell.get("connections", {}) or kind.startswith("$mem"):
            return False  # a clocked cell whose edge this reading does not know
    if not falling:
        return False
    seen: set[str] = set()
    todo = [
        b
        for cell in falling
        for port, bits in cell["connections"].items()
        if port != "CLK" and cell.get("port_directions", {}).get(port) == "input"
        for b in _bits(bits)
    ]
    while todo:
        bit = todo.pop()
        if isinstance(bit, str) or bit in inputs:
            continue  # a constant, or a top-level input
        if bit in clock_bits or bit not in driver:
            return False  # the clock as data, or a bit nothing drives
        name, cell = driver[bit]
        if name in seen:
            continue
        seen.add(name)
        params = cell.get("parameters", {})
        if "CLK_POLARITY" in params:
            if int(str(params["CLK_POLARITY"]), 2) != 0:
                return False  # a rising-edge flip-flop in the cone
            continue  # a falling-edge flip-flop: its output is the state the claim allows
        directions = cell.get("port_directions", {})
        todo += [
            b
            for port, bits in cell.get("connections", {}).items()
            if directions.get(port) == "input"
            for b in _bits(bits)
        ]
    return True


def prove(
    exe: str,
    design: Design,
    mutant_files: Sequence[str],
    root: Path,
    tag: str,
    limit_s: float,
    build: BuildOptions = NO_OPTIONS,
) -> tuple[bool, float]:
    """(whether the claim holds for the mutant whose standalone sources are ``mutant_files``
    (paths from ``root``), the CPU seconds Yosys took)."""
    assert design.clock is not None
    script = root / f"edge-{tag}.ys"
    out = f"edge-{tag}.json"
    script.write_text(elaborated_json_script(design, mutant_files, out, build), encoding="utf-8")
    done, used, _ = yosys.run_limited(yosys.command(exe, script, root), limit_s, cwd=root)
    if done is None or done.returncode != 0 or not (root / out).is_file():
        return False, used
    netlist = json.loads((root / out).read_text(encoding="utf-8"))
    return reads_only_inputs_and_itself(netlist, design.top, design.clock.port), used
