"""hwtp ci at project scale: the shared simulator process, shards and merge, the survivor
baseline, timeouts as chosen, GitHub annotations and SARIF.

The simulator tests copy examples/ci (sat_counter and its cocotb testbench) into a temporary
folder and run 8 of its mutants (seed 0): the RTL is not edited, so every run shares one
schemata build through the build cache.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jsonschema
import pytest

from hwtp.ci import baseline
from hwtp.ci.mutation import CiReport, MutantResult, Status
from hwtp.ci.reports import github_annotations
from hwtp.ci.runs import Run, TestOutcome, TestStatus
from hwtp.ci.sarif import sarif
from hwtp.ci.shards import merge, parse_shard
from hwtp.errors import ConfigError
from hwtp.sim.runner import EvalStatus

from .test_ci import Run_, check_junit

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ci"
FEW = ("-n", "8", "--seed", "0", "-j", "2", "--timeout", "60", "--min-score", "0")

TIME_TB = '''
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge
from cocotb.utils import get_sim_time


@cocotb.test()
async def test_reset_at_30ns(dut):
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    dut.inc.value = 1
    dut.dec.value = 0
    dut.rst_n.value = 0
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst_n.value = 1
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    assert int(dut.count.value) == 2
    assert get_sim_time("ns") == 30  # absolute time: true only in a process of its own
'''


# --------------------------------------------------------------------------- reports (no simulator)


def _report(tmp_path: Path, timeouts_as: str = "excluded") -> CiReport:
    rtl = tmp_path / "rtl"
    rtl.mkdir(exist_ok=True)
    lines = ["module top(input a, b, output y, z);", "  assign y = a & b;", "  assign z = a & b;", "endmodule"]
    (rtl / "top.v").write_text("\n".join(lines) + "\n")
    golden = Run(EvalStatus.PASS, (TestOutcome("t", "test_top", TestStatus.PASSED),), 0.5)

    def mutant(i: int, status: Status, line: int, by: str = "|") -> MutantResult:
        key = baseline.identity("rtl/top.v", "logical.and_to_or", "&", by, lines, line, 14)
        return MutantResult(f"m{i:04d}", "logical.and_to_or", "rtl/top.v", line, 14, "&", by, status, 1.0,
                            ("test_top.t",) if status == Status.KILLED else (), None,
                            lines[line - 1].strip(), lines[line - 1].strip().replace("&", "|"),
                            f"--- a/rtl/top.v\n+++ b/rtl/top.v\n@@ -{line} +{line} @@\n-x, y: \"&\"\n+x | y\n", key)

    mutants = (mutant(1, Status.KILLED, 2), mutant(2, Status.SURVIVED, 3), mutant(3, Status.TIMEOUT, 2),
               mutant(4, Status.ERROR, 3, "^"), mutant(5, Status.KILLED, 3, "~&"))
    return CiReport("top", "top", tmp_path, mutants, golden, min_score=0.5, timeouts_as=timeouts_as)


def test_timeouts_as_sets_the_formula_and_the_score(tmp_path: Path) -> None:
    excluded = _report(tmp_path)
    assert excluded.formula == "killed 2 / (valid 5 - equivalent 0 - not_elaborated 0 - indeterminate 2)"
    assert excluded.score == pytest.approx(2 / 3)
    killed = _report(tmp_path, "killed")
    assert killed.formula == "(killed 2 + timeout 1) / (valid 5 - equivalent 0 - not_elaborated 0 - error 1)"
    assert killed.score == pytest.approx(3 / 4)
    survived = _report(tmp_path, "survived")
    assert survived.formula == "killed 2 / (valid 5 - equivalent 0 - not_elaborated 0 - error 1)"
    assert survived.score == pytest.approx(2 / 4)
    assert not replace(survived, min_score=0.6).gate_passed and replace(killed, min_score=0.6).gate_passed


def test_baseline_identity_survives_unrelated_edits_and_tells_twins_apart() -> None:
    lines = ["module m;", "  assign y = a & b;", "  assign y = a & b;", "  assign z = a & b & c;", "endmodule"]
    key = baseline.identity("m.v", "op", "&", "|", lines, 3, 15)
    edited = ["// a comment", "module m;", "  // another", "  assign y = a & b;", "    assign y  =  a & b;",
              "  assign z = a & b & c;", "endmodule"]
    assert baseline.identity("m.v", "op", "&", "|", edited, 5, 17) == key  # moved, re-indented, same line
    assert baseline.identity("m.v", "op", "&", "|", edited, 4, 15) != key  # its twin above it
    # the second & of a line is not the first
    assert (baseline.identity("m.v", "op", "&", "|", lines, 4, 16)
            != baseline.identity("m.v", "op", "&", "|", lines, 4, 20))
    # another file, operator or line text is another mutant
    assert baseline.identity("n.v", "op", "&", "|", lines, 3, 15) != key
    assert baseline.identity("m.v", "op", "&", "|", [*lines[:2], "  assign y = a & d;", *lines[3:]], 3, 15) != key


def test_baseline_accepts_listed_survivors_and_names_new_killed_and_gone(tmp_path: Path) -> None:
    report = _report(tmp_path)
    path = tmp_path / "baseline.json"
    path.write_text(baseline.render(report.survivors))
    entries = baseline.load(path)
    assert [e.id for e in entries] == ["m0002"]
    check = baseline.check(report, entries, str(path))
    assert (check.new, check.accepted, check.now_killed, check.gone) == ((), ("m0002",), (), ())
    assert replace(report, min_score=None, baseline=check).gate_passed

    # m0002 killed now, m0005 survives now, and an entry for a line that no longer exists
    rows = json.loads(path.read_text())
    rows["survivors"].append({**rows["survivors"][0], "context": "assign w = a & b;", "id": "m0099"})
    path.write_text(json.dumps(rows))
    flipped = tuple(replace(m, status={Status.SURVIVED: Status.KILLED, Status.KILLED: Status.SURVIVED}[m.status])
                    if m.id in ("m0002", "m0005") else m for m in report.mutants)
    check = baseline.check(replace(report, mutants=flipped), baseline.load(path), str(path))
    assert check.new == ("m0005",) and check.accepted == ()
    assert [e.id for e in check.now_killed] == ["m0002"] and [e.id for e in check.gone] == ["m0099"]
    assert not replace(report, mutants=flipped, min_score=None, baseline=check).gate_passed
    (tmp_path / "bad.json").write_text("{\"format\": \"other\"}")
    with pytest.raises(ConfigError, match="not an hwtp ci baseline"):
        baseline.load(tmp_path / "bad.json")


_COMMAND = re.compile(r"^::warning (?P<props>[^:]*)::(?P<message>.*)$")
_PROPERTY = re.compile(r"^(file|line|col|endLine|endColumn|title)=([^,:\n\r%]|%25|%0D|%0A|%3A|%2C)*$")


def check_annotations(text: str) -> list[dict[str, str]]:
    """Every line a GitHub workflow ``warning`` command: known properties, values and message
    escaped as the runner expects (% CR LF, and : , in properties)."""
    out = []
    for line in text.splitlines():
        m = _COMMAND.match(line)
        assert m, line
        props = m.group("props").split(",")
        for prop in props:
            assert _PROPERTY.match(prop), prop
        assert "\n" not in m.group("message") and "\r" not in m.group("message")
        assert re.fullmatch(r"([^%]|%25|%0D|%0A)*", m.group("message")), m.group("message")
        out.append({**dict(p.split("=", 1) for p in props), "message": m.group("message")})
    return out


def test_annotations_are_github_warning_commands(tmp_path: Path) -> None:
    report = _report(tmp_path)
    found = check_annotations(github_annotations(report, tmp_path))
    assert [(a["file"], a["line"], a["col"]) for a in found] == [("rtl/top.v", "3", "14")]
    assert found[0]["title"] == "hwtp ci%3A surviving mutant m0002 (logical.and_to_or)"
    assert "%0A+x | y" in found[0]["message"] and "x, y" in found[0]["message"]
    accepted = baseline.check(report, (baseline.Entry(report.survivors[0].key),), "b.json")
    assert github_annotations(replace(report, baseline=accepted), tmp_path) == ""


#: SARIF 2.1.0's required structure for what hwtp writes (from the OASIS specification, sections
#: 3.13 sarifLog, 3.14 run, 3.18 tool, 3.19 toolComponent, 3.27 result, 3.28 location, 3.29
#: physicalLocation, 3.30 region, 3.4 artifactLocation, 3.11 message, 3.49 reportingDescriptor).
_MESSAGE = {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}],
            "properties": {"text": {"type": "string"}, "markdown": {"type": "string"}}}
SARIF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "format": "uri"},
        "runs": {"type": "array", "items": {
            "type": "object",
            "required": ["tool"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                    "type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string"}, "rules": {"type": "array", "items": {
                        "type": "object", "required": ["id"],
                        "properties": {"id": {"type": "string"}, "shortDescription": _MESSAGE,
                                       "fullDescription": _MESSAGE,
                                       "defaultConfiguration": {"type": "object", "properties": {
                                           "level": {"enum": ["none", "note", "warning", "error"]}}}}}}}}}},
                "results": {"type": "array", "items": {
                    "type": "object", "required": ["message"],
                    "properties": {
                        "ruleId": {"type": "string"},
                        "ruleIndex": {"type": "integer", "minimum": -1},
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "message": _MESSAGE,
                        "partialFingerprints": {"type": "object", "additionalProperties": {"type": "string"}},
                        "properties": {"type": "object"},
                        "locations": {"type": "array", "items": {"type": "object", "properties": {
                            "physicalLocation": {
                                "type": "object",
                                "anyOf": [{"required": ["artifactLocation"]}, {"required": ["address"]}],
                                "properties": {
                                    "artifactLocation": {"type": "object", "properties": {
                                        "uri": {"type": "string", "format": "uri-reference"},
                                        "uriBaseId": {"type": "string"}}},
                                    "region": {"type": "object", "properties": {
                                        "startLine": {"type": "integer", "minimum": 1},
                                        "startColumn": {"type": "integer", "minimum": 1},
                                        "snippet": {"type": "object", "required": ["text"]}}}}}}}},
                    }}},
                "properties": {"type": "object"},
            }}},
    },
}


def check_sarif(text: str) -> dict[str, Any]:
    log: dict[str, Any] = json.loads(text)
    jsonschema.validate(log, SARIF_SCHEMA, format_checker=jsonschema.FormatChecker())
    for run in log["runs"]:  # ruleIndex points at the rule of ruleId (3.27.6)
        rules = run["tool"]["driver"].get("rules", [])
        for result in run["results"]:
            assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    return log


def test_sarif_holds_each_survivor_with_its_diff(tmp_path: Path) -> None:
    log = check_sarif(sarif(_report(tmp_path), tmp_path))
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "logical.and_to_or" and result["level"] == "warning"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "rtl/top.v" and location["region"]["startLine"] == 3
    assert "+x | y" in result["message"]["markdown"] and result["properties"]["diff"].startswith("--- a/rtl")
    with pytest.raises(jsonschema.ValidationError):  # the checker is not a rubber stamp
        check_sarif(json.dumps({**log, "version": "2.0.0"}))


def test_shard_option_and_merge_refuse_what_is_not_one_run(tmp_path: Path) -> None:
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "2", "a/b"):
        with pytest.raises(ConfigError, match="--shard"):
            parse_shard(bad)
    report = _report(tmp_path)
    order = tuple(m.id for m in report.mutants)
    one = replace(report, mutants=report.mutants[0::2], shard=(1, 2), order=order)
    two = replace(report, mutants=report.mutants[1::2], shard=(2, 2), order=order)
    paths = []
    for i, part in enumerate((one, two), 1):
        paths.append(tmp_path / f"s{i}.json")
        paths[-1].write_text(json.dumps(part.as_dict()))
    merged = merge(paths, tmp_path)
    assert merged.as_dict() == report.as_dict()
    with pytest.raises(ConfigError, match="shards missing: 2/2"):
        merge(paths[:1], tmp_path)
    with pytest.raises(ConfigError, match="also"):
        merge([paths[0], paths[0]], tmp_path)


# --------------------------------------------------------------------------- with the simulator


def _example(tmp_path: Path) -> Path:
    root = tmp_path / "example"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _outcome(report: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(m["id"], m["status"], sorted(m["killed_by"])) for m in report["mutants"]]


@pytest.mark.sim
def test_shared_process_gives_what_a_process_per_mutant_gives(tmp_path: Path, run_cli: Run_) -> None:
    root = _example(tmp_path)
    config = str(root / "hwtp.yaml")
    code, out, err = run_cli("ci", "--config", config, *FEW, "--verify", "--json", tmp_path / "shared.json",
                             "--sarif", tmp_path / "s.sarif", "--annotations")
    assert code == 0, out + err
    assert "shared simulator process" in err, err
    code, out2, err2 = run_cli("ci", "--config", config, *FEW, "--no-shared", "--json", tmp_path / "alone.json")
    assert code == 0 and "one process per mutant (shared: false)" in err2, out2 + err2
    shared = json.loads((tmp_path / "shared.json").read_text())
    alone = json.loads((tmp_path / "alone.json").read_text())
    assert _outcome(shared) == _outcome(alone)
    assert {s for _i, s, _k in _outcome(shared)} >= {"killed", "survived"}
    survivors = [m for m in shared["mutants"] if m["status"] == "survived"]
    found = check_annotations("\n".join(ln for ln in out.splitlines() if ln.startswith("::")))
    assert [int(a["line"]) for a in found] == [m["line"] for m in survivors]
    assert all(a["file"].endswith(m["file"]) for a, m in zip(found, survivors, strict=True))
    log = check_sarif((tmp_path / "s.sarif").read_text())
    assert [r["properties"]["mutant"] for r in log["runs"][0]["results"]] == [m["id"] for m in survivors]


@pytest.mark.sim
def test_a_testbench_reading_simulation_time_falls_back_to_a_process_per_mutant(tmp_path: Path,
                                                                               run_cli: Run_) -> None:
    root = _example(tmp_path)
    (root / "tests" / "test_sat_counter.py").write_text(TIME_TB)
    # --verify: checked now even when an earlier run of this suite cached the verdict
    code, out, err = run_cli("ci", "--config", root / "hwtp.yaml", *FEW, "--verify", "--json", tmp_path / "r.json")
    assert code == 0, out + err
    assert "one process per mutant: a shared process did not give what a process of its own gives" in err, err
    assert "absolute simulation time" in err
    assert "test_sat_counter.test_reset_at_30ns" in err
    shared = json.loads((tmp_path / "r.json").read_text())
    code, out, err = run_cli("ci", "--config", root / "hwtp.yaml", *FEW, "--no-shared", "--json",
                             tmp_path / "alone.json")
    assert _outcome(shared) == _outcome(json.loads((tmp_path / "alone.json").read_text()))
    # the verdict is remembered: the next run goes straight to a process per mutant, and says why
    code, out, err = run_cli("ci", "--config", root / "hwtp.yaml", *FEW)
    assert "not sound in a shared process" in err and "--verify" in err, err


def _no_times(text: str) -> str:
    return re.sub(r' (time|timestamp|hostname)="[^"]*"', "", text)


@pytest.mark.sim
def test_shards_merge_into_the_unsharded_reports(tmp_path: Path, run_cli: Run_) -> None:
    root = _example(tmp_path)
    config = str(root / "hwtp.yaml")
    kinds = {"--json": "json", "--junit": "xml", "--markdown": "md", "--lcov": "lcov"}

    def outputs(stem: str) -> list[str]:
        return [a for flag, ext in kinds.items() for a in (flag, str(tmp_path / f"{stem}.{ext}"))]

    code, out, err = run_cli("ci", "--config", config, *FEW, *outputs("whole"))
    assert code == 0, out + err
    for i in (1, 2, 3):
        code, out, err = run_cli("ci", "--config", config, *FEW, "--shard", f"{i}/3", "--json", tmp_path / f"s{i}.json")
        assert code == 0 and f"shard {i}/3" in out, out + err
    code, out, err = run_cli("ci", "merge", "--config", config, *(tmp_path / f"s{i}.json" for i in (3, 1, 2)),
                             *outputs("merged"))
    assert code == 0, out + err
    whole, merged = (json.loads((tmp_path / f"{s}.json").read_text()) for s in ("whole", "merged"))
    for doc in (whole, merged):
        for key in ("seconds", "build", "timeout_s"):
            doc.pop(key)
        doc["golden"].pop("seconds")
        for m in doc["mutants"]:
            m.pop("seconds")
    assert merged == whole
    for ext in ("md", "lcov"):
        assert (tmp_path / f"merged.{ext}").read_text() == (tmp_path / f"whole.{ext}").read_text()
    junits = [_no_times((tmp_path / f"{s}.xml").read_text()) for s in ("whole", "merged")]
    assert junits[0] == junits[1]
    check_junit((tmp_path / "merged.xml").read_text())
    assert len(ElementTree.fromstring(junits[1]).findall(".//testcase")) == whole["counts"]["valid"]


@pytest.mark.sim
def test_baseline_accepts_todays_survivors_and_catches_a_new_one(tmp_path: Path, run_cli: Run_) -> None:
    root = _example(tmp_path)
    config = root / "hwtp.yaml"
    base = tmp_path / "baseline.json"
    code, out, err = run_cli("ci", "--config", config, *FEW, "--write-baseline", base, "--min-score", "1")
    assert code == 1, out + err  # survivors fail a 100% gate...
    code, out, err = run_cli("ci", "--config", config, *FEW, "--baseline", base, "--min-score", "0")
    assert code == 0 and "0 new" in out, out + err  # ...and a baseline accepts them
    # a weaker testbench (only the reset test): the mutants counting up now survive too
    text = config.read_text().replace("paths: [tests]", "paths: [tests]\n  filter: test_reset")
    config.write_text(text)
    code, out, err = run_cli("ci", "--config", config, *FEW, "--baseline", base, "--json", tmp_path / "r.json")
    assert code == 1, out + err
    report = json.loads((tmp_path / "r.json").read_text())
    new = report["baseline"]["new"]
    assert new and "the gate fails on new survivors" in out and all(i in out for i in new)
    assert len(report["baseline"]["accepted"]) == len(baseline.load(base))
