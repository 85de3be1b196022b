"""The operator catalog and pyslang site discovery (no simulator needed).

One parametrized test runs every registered operator's examples, so a new operator is tested
as soon as it is registered (cosmic-ray's ``test_operator_samples``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pyslang
import pytest

from hwtp.errors import DesignError, MutantError
from hwtp.mutators import operators
from hwtp.mutators.base import example
from hwtp.mutators.operators import all_operators, families, get_operator, select
from hwtp.mutators.ops_tokens import TokenSwap
from hwtp.mutators.site import Site
from hwtp.mutators.sites import find_sites

DESIGNS = Path(__file__).resolve().parents[1] / "designs"


def apply(text: str, site: Site) -> str:
    """The standalone mutant of ``text`` for ``site``."""
    data = text.encode()
    return (data[:site.start] + site.standalone.encode() + data[site.end:]).decode()


def syntax_errors(text: str) -> list[str]:
    tree = pyslang.syntax.SyntaxTree.fromText(text, pyslang.SourceManager(), "mutant.v")
    return [str(d.code) for d in tree.diagnostics if d.isError()]


def elaboration_errors(text: str) -> list[str]:
    """Errors of parsing and elaborating ``text`` (every module a top) with pyslang."""
    compilation = pyslang.ast.Compilation()
    compilation.addSyntaxTree(
        pyslang.syntax.SyntaxTree.fromText(text, pyslang.SourceManager(), "mutant.v"))
    return [str(d.code) for d in compilation.getAllDiagnostics() if d.isError()]


def shipped_sources() -> list[Path]:
    """Every shipped RTL file that pyslang parses (designs may still be in progress)."""
    return [p for p in sorted(DESIGNS.glob("*/rtl/*.v")) if not syntax_errors(p.read_text())]


EXAMPLES = [pytest.param(op.name, before, after, id=f"{op.name}-{i}")
            for op in all_operators() for i, (before, after) in enumerate(op.examples)]


@pytest.mark.parametrize(("name", "before", "after"), EXAMPLES)
def test_operator_examples(name: str, before: str, after: str) -> None:
    op = get_operator(name)
    sites = find_sites(before, "example.v", [op])
    assert sites, f"{name} finds no site in its own example"
    assert apply(before, sites[0]) == after
    assert not syntax_errors(after)
    assert all(s.operator == name for s in sites)
    assert all(s.equivalent == name.startswith("equivalent.") for s in sites)


def test_every_operator_has_examples_and_namespaced_name() -> None:
    for op in all_operators():
        family, _, what = op.name.partition(".")
        assert family and what, op.name
        assert op.examples, op.name
        assert op.description and "\n" not in op.description, op.name
    assert len({op.name for op in all_operators()}) == len(all_operators())


@pytest.fixture(scope="module", params=shipped_sources(), ids=lambda p: p.parent.parent.name)
def shipped_sites(request: pytest.FixtureRequest) -> tuple[str, list[Site]]:
    text = request.param.read_text()
    return text, find_sites(text, request.param.name)


def test_site_spans_match_their_text(shipped_sites: tuple[str, list[Site]]) -> None:
    text, sites = shipped_sites
    data = text.encode()
    assert sites
    for site in sites:
        assert data[site.start:site.end].decode() == site.original
        assert site.guard_start <= site.start <= site.end <= site.guard_end
        line_start = data.rfind(b"\n", 0, site.start) + 1
        assert site.line == data.count(b"\n", 0, site.start) + 1
        assert site.col == site.start - line_start + 1
        assert site.standalone != site.original
    keys = [(s.start, s.operator, s.replacement) for s in sites]
    assert keys == sorted(keys)


def test_every_standalone_mutant_parses(shipped_sites: tuple[str, list[Site]]) -> None:
    """Every mutant parses; where golden elaborates cleanly, every mutant elaborates too."""
    text, sites = shipped_sites
    check = syntax_errors if elaboration_errors(text) else elaboration_errors
    broken = [(s.line, s.col, s.operator) for s in sites if check(apply(text, s))]
    assert not broken


WIDTHS = """\
module widths #(parameter W = 4, parameter [3:0] INIT = 4'd3) (
    input  wire [W-1:0] a,
    input  wire [3:0]   b,
    output wire [W-1:0] y,
    output wire [7:0]   z
);
    localparam [1:0] ONE = 2'd1;
    wire [3:0] t [0:1];
    genvar g;
    generate for (g = 0; g < 2; g = g + 1) begin : gen
        assign t[g] = a ^ b;
    end endgenerate
    assign y = a + b[2:0];
    assign z = {2{a[1:0], 2'b01}};
endmodule
"""


def _line_of(text: str, offset: int) -> str:
    data = text.encode()
    return data[data.rfind(b"\n", 0, offset) + 1:data.find(b"\n", offset)].decode()


def test_no_site_in_constant_contexts_by_default() -> None:
    sites = find_sites(WIDTHS, "widths.v")
    runtime_lines = {"        assign t[g] = a ^ b;", "    assign y = a + b[2:0];",
                     "    assign z = {2{a[1:0], 2'b01}};"}
    assert {_line_of(WIDTHS, s.start) for s in sites} <= runtime_lines
    count = WIDTHS.index("{2{") + 1
    assert all(s.start != count for s in sites)
    assert "2'b01" in {s.original for s in sites}
    lhs = WIDTHS.index("t[g]")
    assert all(not lhs <= s.start < lhs + 4 for s in sites)
    ranges = {s.original for s in sites if s.operator.startswith("index.shift_range")}
    assert ranges == {"2:0", "1:0"}


def test_include_widths_adds_width_sites_but_not_replication_counts() -> None:
    default = set(find_sites(WIDTHS, "widths.v", ["constant"]))
    wide = set(find_sites(WIDTHS, "widths.v", ["constant"], include_widths=True))
    added = wide - default
    assert default < wide
    lines = {_line_of(WIDTHS, s.start).strip() for s in added}
    assert "localparam [1:0] ONE = 2'd1;" in lines
    assert "input  wire [3:0]   b," in lines
    assert any(line.startswith("module widths") for line in lines)
    assert not any(line.startswith("generate") for line in lines)
    count = WIDTHS.index("{2{") + 1
    assert all(s.start != count for s in wide)


def test_lvalues_events_and_statements() -> None:
    text = ("module m(input clk, input [3:0] a, output reg [3:0] q);\n"
            "  always @(posedge clk) if (a[0]) q[a[1]] <= a + 1; else q = 0;\n"
            "endmodule\n")
    sites = find_sites(text, "m.v")
    lhs = text.index("q[a[1]]")
    assert all(not lhs <= s.start < lhs + 7 for s in sites if s.guard != "stmt")
    edge = next(s for s in sites if s.operator == "edge.pos_to_neg")
    assert text.encode()[edge.guard_start:edge.guard_end] == b"posedge clk"
    kinds = {s.operator: s for s in sites if s.operator.startswith("assignment.")}
    assert set(kinds) == {"assignment.delete", "assignment.blocking_to_nonblocking",
                          "assignment.nonblocking_to_blocking"}
    swap = kinds["assignment.nonblocking_to_blocking"]
    assert text.encode()[swap.guard_start:swap.guard_end] == b"q[a[1]] <= a + 1;"


def test_no_nonblocking_assignment_in_functions() -> None:
    text = ("module m(input [3:0] a, output [3:0] y);\n"
            "  function [3:0] f; input [3:0] x; begin f = x + 1; end endfunction\n"
            "  assign y = f(a);\n"
            "endmodule\n")
    names = {s.operator for s in find_sites(text, "m.v")}
    assert "assignment.delete" in names
    assert "arithmetic.add_to_sub" in names
    assert "assignment.blocking_to_nonblocking" not in names


def test_constant_keeps_size_and_base() -> None:
    text = ("module m(output [3:0] y, output [7:0] z);\n"
            "  assign y = 4'hF;\n  assign z = 8'b0;\nendmodule\n")
    sites = find_sites(text, "m.v", ["constant"])
    changed = {(s.original, s.operator): s.standalone for s in sites}
    assert ("4'hF", "constant.plus_one") not in changed
    assert changed[("4'hF", "constant.minus_one")] == "4'hE"
    assert changed[("4'hF", "constant.zeros")] == "4'h0"
    assert changed[("8'b0", "constant.ones")] == "8'b11111111"
    assert ("8'b0", "constant.minus_one") not in changed


def test_select_by_family_and_name() -> None:
    relational = select(["relational"])
    assert relational and all(op.name.startswith("relational.") for op in relational)
    assert [op.name for op in select(["edge.pos_to_neg", "edge"])] == ["edge.pos_to_neg",
                                                                     "edge.neg_to_pos"]
    assert set(families()) >= {"arithmetic", "relational", "logical", "bitwise", "reduction",
                               "shift", "unary", "constant", "condition", "case", "assignment",
                               "edge", "index", "equivalent"}


def test_unknown_operator_lists_valid_names() -> None:
    with pytest.raises(MutantError) as info:
        select(["relational.lt_to_lte"])
    assert "relational.lt_to_le" in str(info.value)
    assert "arithmetic" in str(info.value)
    with pytest.raises(MutantError, match=r"relational\.lt_to_le"):
        get_operator("nope")
    with pytest.raises(MutantError):
        find_sites("module m; endmodule\n", "m.v", ["nope"])


def test_syntax_error_is_a_design_error() -> None:
    with pytest.raises(DesignError, match=r"broken\.v"):
        find_sites("module m(input a; endmodule\n", "broken.v")


class _EntryPoint:
    def __init__(self, loaded: object) -> None:
        self.name, self.value, self.loaded = "custom", "custom_ops:OPERATORS", loaded

    def load(self) -> object:
        return self.loaded


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[object], None]]:
    """Install one fake entry point in the ``hwtp.operators`` group."""

    def install(loaded: object) -> None:
        monkeypatch.setattr(operators, "entry_points", lambda group: (
            [_EntryPoint(loaded)] if group == operators.ENTRY_POINT_GROUP else []))
        operators.all_operators.cache_clear()

    yield install
    operators.all_operators.cache_clear()


def test_plugin_operators_come_from_entry_points(plugin: Callable[[object], None]) -> None:
    xnor = TokenSwap("custom.xor_to_xnor", "binary", "^", "~^", "a ^ b becomes a ~^ b",
                     (example("assign y = a ^ b;", "assign y = a ~^ b;"),))
    plugin([xnor])
    assert get_operator("custom.xor_to_xnor") is xnor
    assert select(["custom"]) == [xnor]
    before, after = xnor.examples[0]
    assert apply(before, find_sites(before, "ex.v", ["custom"])[0]) == after


def test_broken_plugin_is_a_mutant_error(plugin: Callable[[object], None]) -> None:
    plugin(object())
    with pytest.raises(MutantError, match="custom_ops"):
        all_operators()


def test_spans_are_utf8_byte_offsets() -> None:
    text = "// café, naïve\nmodule m(input a, b, output y); /* → */ assign y = a & b; endmodule\n"
    site = find_sites(text, "m.v", ["bitwise.and_to_or"])[0]
    assert text.encode()[site.start:site.end] == b"&"
    assert (site.line, site.col) == (2, text.splitlines()[1].encode().index(b"&") + 1)
    assert apply(text, site).endswith("assign y = a | b; endmodule\n")
