"""The pyslang and pyverilog frontends find the same sites (no simulator needed), and
``hwtp mutate --frontend pyverilog`` makes the same mutant set as the default."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hwtp.errors import ConfigError, DesignError, MutantError
from hwtp.mutators import pyverilog_frontend
from hwtp.mutators.engine import MutationConfig
from hwtp.mutators.pyverilog_frontend import find_sites_pyverilog, parse
from hwtp.mutators.sites import find_sites, site_finder

DESIGNS = Path(__file__).resolve().parents[1] / "designs"
SOURCES = sorted(DESIGNS.glob("*/rtl/*.v"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.parent.name)
def test_frontends_agree_on_shipped_designs(path: Path) -> None:
    text = path.read_text()
    try:
        parse(text, path.name)
    except DesignError:
        pytest.skip("pyverilog does not parse this source")
    slang = find_sites(text, path.name)
    assert slang
    assert find_sites_pyverilog(text, path.name) == slang


MIXED = """\
module mixed #(parameter W = 4) (
    input clk, input rst_n, input [W-1:0] a, input [W-1:0] b, input [1:0] s,
    output reg [W-1:0] q, output [W-1:0] y, output reg r
);
    /* a comment with (parentheses), a ; and a café */
    wire [W-1:0] t = ((a)) & ~(b | {2{s}});    // nested parentheses
    assign y = s[0] ? a[s +: 2] : {a[W-1:1], ^b};
    function [W-1:0] inc; input [W-1:0] x; begin inc = x + 1'b1; end endfunction
    always @(posedge clk or negedge rst_n) begin : seq
        if (!rst_n) q <= {W{1'b0}};
        else if ((a < b) && !(s == 2'd3)) q <= inc(q) - (b >>> 1);
        else case (s)
            2'd0, 2'd1: q <= a;
            2'd2: ;
            default: q <= $signed(b) * 4'sd3;
        endcase
    end
    always @* r = |t ^ &a;
endmodule
"""


def test_frontends_agree_on_mixed_constructs() -> None:
    slang = find_sites(MIXED, "mixed.v")
    families = {s.operator.split(".")[0] for s in slang}
    assert families >= {"arithmetic", "relational", "logical", "bitwise", "reduction", "shift",
                        "unary", "constant", "condition", "case", "assignment", "edge", "index",
                        "equivalent"}
    assert find_sites_pyverilog(MIXED, "mixed.v") == slang


def test_pyverilog_frontend_refuses_widths() -> None:
    with pytest.raises(MutantError, match="include_widths"):
        find_sites_pyverilog(MIXED, "mixed.v", include_widths=True)


def test_pyverilog_parse_error_is_a_design_error() -> None:
    with pytest.raises(DesignError, match=r"broken\.v"):
        find_sites_pyverilog("module m(input a; endmodule\n", "broken.v")


def test_frontend_is_chosen_by_name() -> None:
    assert site_finder("pyslang") is find_sites and site_finder("pyverilog") is find_sites_pyverilog
    with pytest.raises(ConfigError, match="valid: pyslang, pyverilog"):
        site_finder("verible")
    with pytest.raises(MutantError, match="--frontend 'verible'"):
        MutationConfig(frontend="verible")


def test_missing_pyverilog_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the optional extra, the front end says what to install (pyverilog hidden here)."""
    pyverilog_frontend._parser.cache_clear()
    monkeypatch.setitem(sys.modules, "pyverilog.vparser.parser", None)  # import raises ImportError
    try:
        with pytest.raises(ConfigError, match=r"pip install 'hwtp\[pyverilog\]'"):
            find_sites_pyverilog(MIXED, "mixed.v")
    finally:
        pyverilog_frontend._parser.cache_clear()


def test_mutate_with_pyverilog_frontend_makes_the_same_mutants(
        run_cli: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
    """Selection, higher-order mutants and equivalents from pyverilog's sites: the same set
    (mutants.json, schemata, diffs) as pyslang's, linted by Verilator (no witness search)."""
    args = ("mutate", "counter_en_load", "-n", "10", "--seed", "3", "--depth", "2", "--equivalents", "2",
            "--witness-cycles", "0", "--formal", "off", "-j", "2")
    outs, parses = {}, {}
    for frontend in ("pyslang", "pyverilog"):
        outs[frontend] = tmp_path / frontend
        before = pyverilog_frontend._parser.cache_info()
        code, _out, err = run_cli(*args, "--frontend", frontend, "-o", outs[frontend])
        assert code == 0, err
        after = pyverilog_frontend._parser.cache_info()
        parses[frontend] = after.hits + after.misses - before.hits - before.misses
    assert parses["pyslang"] == 0 < parses["pyverilog"]  # each run used the front end it names
    files = {f: sorted(p.relative_to(o) for p in o.rglob("*") if p.is_file()) for f, o in outs.items()}
    assert files["pyslang"] == files["pyverilog"] and Path("mutants.json") in files["pyslang"]
    for name in files["pyslang"]:
        assert (outs["pyslang"] / name).read_bytes() == (outs["pyverilog"] / name).read_bytes(), name
