"""``hwtp designs import``, the design resolver (--designs-dir, HWTP_DESIGNS), splits, and
``hwtp run``/``hwtp eval`` on an imported corpus."""

from __future__ import annotations

import contextlib
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from hwtp.cli.main import main
from hwtp.corpus import splits
from hwtp.rtl.design import load_design

INC = "module inc(input [3:0] a, output [3:0] y);\n  assign y = a + 4'd1;\nendmodule\n"
CNT = """module cnt(input clk, input rst_n, input en, output reg [3:0] q);
  always @(posedge clk or negedge rst_n)
    if (!rst_n) q <= 4'd0; else if (en) q <= q + 4'd1;
endmodule
"""
_spec = importlib.util.spec_from_file_location("hwtp_tests_llm_server_i", Path(__file__).with_name("llm_server.py"))
assert _spec and _spec.loader
llm_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_server)

XOR = "module xor8(input [7:0] a, input [7:0] b, output [7:0] y);\n  assign y = a ^ b;\nendmodule\n"


def write_corpus(root: Path) -> tuple[Path, Path]:
    """A folder of designs (combinational with spec.md, sequential with its RTL in rtl/ and a
    README spec, a syntax error, no outputs, a copy of the first) and a JSONL manifest whose
    design has its spec in a separate file elsewhere."""
    folder = root / "src"
    for name, files in {
        "inc": {"inc.v": INC, "spec.md": "y is a plus one, modulo 16.\n"},
        "cnt": {"rtl/cnt.v": CNT, "README.md": "A 4-bit counter with enable; rst_n clears it.\n", "tb_cnt.v": "x"},
        "bad": {"bad.v": "module bad(input a, output y)\n  assign y = a;\nendmodule\n"},
        "noout": {"noout.v": "module noout(input a, input b);\n  wire c = a & b;\nendmodule\n"},
        "zcopy": {"copy_of_inc.v": INC},
    }.items():
        for rel, text in files.items():
            (folder / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / name / rel).write_text(text)
    (root / "specs").mkdir()
    (root / "specs" / "xor8.txt").write_text("y is the bitwise xor of a and b.\n")
    (root / "rtl").mkdir()
    (root / "rtl" / "xor8_ref.v").write_text(XOR)
    manifest = root / "more.jsonl"
    manifest.write_text(json.dumps({"name": "xor8", "rtl": "rtl/xor8_ref.v", "spec": "specs/xor8.txt"}) + "\n")
    return folder, manifest


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    folder, manifest = write_corpus(root)
    out = root / "designs"
    assert main(["designs", "import", str(folder), str(manifest), "-o", str(out), "-j", "2"]) == 0
    return out


def _summary(out: Path) -> dict[str, dict]:
    data = json.loads((out / "import.json").read_text())
    return {
        Path(d["origin"].split(":")[0]).stem if d["origin"].endswith(":1") else Path(d["origin"]).name: d
        for d in data["designs"]
    }


@pytest.mark.sim
def test_import_corpus(corpus: Path, run_cli: Callable[..., tuple[int, str, str]]) -> None:
    entries = _summary(corpus)
    assert {k: v["status"] for k, v in entries.items()} == {
        "inc": "imported",
        "cnt": "imported",
        "bad": "rejected",
        "noout": "rejected",
        "zcopy": "duplicate",
        "more": "imported",
    }
    assert entries["bad"]["reason"] == "parse" and "bad.v:1:" in entries["bad"]["detail"]
    assert entries["noout"]["reason"] == "no_outputs"
    assert entries["zcopy"]["of"] == "inc"
    inc, cnt, xor8 = (load_design(corpus / n) for n in ("inc", "cnt", "xor8"))
    assert inc.kind == "combinational" and inc.spec.startswith("y is a plus one")
    assert cnt.kind == "sequential" and cnt.clock and cnt.clock.port == "clk"
    assert cnt.reset and (cnt.reset.port, cnt.reset.active) == ("rst_n", "low")
    assert [s.path for s in cnt.sources] == ["rtl/cnt.v"]  # the testbench was left out
    assert cnt.spec.startswith("A 4-bit counter") and xor8.spec.startswith("y is the bitwise xor")
    assert not (corpus / "bad").exists() and not (corpus / "zcopy").exists()
    # the reference plan passes on golden, found by name through --designs-dir
    code, out, _ = run_cli("sim", "--designs-dir", corpus, "cnt")
    assert code == 0, out
    assert "PASS" in out


@pytest.mark.sim
def test_import_resumes(corpus: Path, tmp_path: Path, run_cli: Callable[..., tuple[int, str, str]]) -> None:
    stamp = (corpus / "inc" / "design.yaml").stat().st_mtime_ns
    root = corpus.parent
    code, out, _ = run_cli("designs", "import", root / "src", root / "more.jsonl", "-o", corpus, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["counts"]["imported"] == 3 and doc["counts"]["rejected"] == 2 and doc["counts"]["duplicate"] == 1
    assert (corpus / "inc" / "design.yaml").stat().st_mtime_ns == stamp  # decided before: not written again
    # the same RTL from elsewhere is a duplicate of what is there
    folder, manifest = write_corpus(tmp_path)
    code, out, _ = run_cli("designs", "import", folder, manifest, "-o", corpus, "--json")
    doc = json.loads(out)
    fresh = [d["status"] for d in doc["designs"] if d["origin"].startswith(str(tmp_path))]
    assert sorted(fresh) == ["duplicate"] * 4 + ["rejected"] * 2
    assert doc["counts"]["imported"] == 3  # the earlier imports' entries are kept


def _design(folder: Path, name: str, text: str) -> None:
    (folder / name / "rtl").mkdir(parents=True)
    (folder / name / "rtl" / "d.v").write_text(text)
    (folder / name / "design.yaml").write_text(f"name: {name}\ntop: d\nsources: [rtl/d.v]\n")


def _module(i: int) -> str:
    return f"module d(input [7:0] a, output [7:0] y);\n  assign y = a + 8'd{i};\nendmodule\n"


def test_split_is_stable_when_designs_are_added(tmp_path: Path, run_cli: Callable[..., tuple[int, str, str]]) -> None:
    for i in range(40):
        _design(tmp_path, f"d{i}", _module(i))
    settings = splits.SplitSettings()
    before = splits.write_splits(tmp_path, settings)
    assert sum(map(len, before.values())) == 40 and before["train"] and before["test"]
    for i in range(40, 60):
        _design(tmp_path, f"d{i}", _module(i))
    after = splits.write_splits(tmp_path, settings)
    for name in splits.SPLITS:
        assert set(before[name]) <= set(after[name])
    # the split follows the RTL, not the name
    _design(tmp_path / "other", "renamed", _module(3))
    where = next(s for s in splits.SPLITS if "d3" in after[s])
    assert splits.split_folder(tmp_path / "other", settings)[where] == ["renamed"]
    assert splits.designs_of([tmp_path], where) == after[where]
    assert json.loads((tmp_path / "splits.json").read_text())["splits"] == after
    code, out, _ = run_cli("designs", "split", tmp_path, "--json")
    assert code == 0 and json.loads(out)["splits"] == after
    code, out, _ = run_cli("designs", "--names", "--split", "test", "--designs-dir", tmp_path)
    assert code == 0 and out.split() == after["test"]


def test_designs_dir_env_and_shipped_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., tuple[int, str, str]]
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _design(first, "adder_carry", _module(1))  # shadows the shipped design of that name
    _design(second, "only_env", _module(2))
    monkeypatch.setenv("HWTP_DESIGNS", str(second))
    code, out, _ = run_cli("designs", "--names", "--designs-dir", first)
    names = out.split()
    assert code == 0 and "only_env" in names and "counter_en_load" in names
    code, out, _ = run_cli("designs", "--json", "--designs-dir", first)
    adder = next(d for d in json.loads(out) if d["name"] == "adder_carry")
    assert [p["name"] for p in adder["ports"]] == ["a", "y"]  # the --designs-dir one wins
    code, _, err = run_cli("mutate", "--designs-dir", first, "no_such_design", "-o", tmp_path / "m")
    assert code == 2
    assert f"{first} (--designs-dir)" in err and f"{second} (HWTP_DESIGNS)" in err and "shipped" in err


@pytest.mark.sim
def test_run_and_eval_on_imported_corpus(
    corpus: Path, tmp_path: Path, run_cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, err = run_cli(
        "run", "--designs-dir", corpus, "inc", "cnt", "-o", tmp_path / "run", "--states", "2", "-G", "2", "-j", "2"
    )
    assert code == 0, err
    assert "inc" in out and "cnt" in out
    code, out, err = run_cli(
        "eval", "--designs-dir", corpus, "inc", "cnt", "-o", tmp_path / "ev", "-G", "2", "--states", "2", "-j", "2"
    )
    assert code == 0, err
    doc = json.loads((tmp_path / "ev" / "eval.json").read_text())
    assert set(doc["designs"]) == {"inc", "cnt"}
    assert doc["overall"]["golden_pass_rate"] == 1.0  # the offline policy passes on golden by construction
    assert doc["overall"]["samples"] == 2 * 2 * 3
    assert set(doc["overall"]["pass_at_k"]["golden"]) == {"1", "2"}
    assert "| golden pass rate | 100.0% |" in out
    # the same plans replayed give the same numbers; the comparison shows no change
    code, _, err = run_cli(
        "eval",
        "--designs-dir",
        corpus,
        "inc",
        "cnt",
        "-o",
        tmp_path / "ev2",
        "-G",
        "2",
        "--states",
        "2",
        "--policy",
        "replay",
        "--from",
        tmp_path / "ev" / "plans",
    )
    assert code == 0, err
    again = json.loads((tmp_path / "ev2" / "eval.json").read_text())
    for key in ("golden_pass_rate", "detection_rate", "outcomes"):
        assert again["overall"][key] == doc["overall"][key]
    code, out, _ = run_cli("eval-compare", tmp_path / "ev", tmp_path / "ev2", "--labels", "random,replay")
    assert code == 0
    assert "| golden pass rate | 100.0% | 100.0% | +0.0 pt |" in out


@pytest.mark.sim
def test_evaluations_that_share_an_executor_keep_its_warm_workers(corpus: Path, tmp_path: Path) -> None:
    """A process that evaluates every N training steps passes one executor: the second call
    finds the first call's simulator processes running, and the executor stays open."""
    from hwtp.evaluation.evaluate import EvalConfig, evaluate
    from hwtp.rtl.design import load_design
    from hwtp.run.config import RunConfig
    from hwtp.sim import warm
    from hwtp.sim.executors.warm import WarmExecutor

    designs = [load_design(corpus / "inc")]
    config = EvalConfig(RunConfig(samples=2, states=2, jobs=1))
    with contextlib.closing(WarmExecutor(workers=1)) as executor:
        first = evaluate(designs, config, tmp_path / "a", executor=executor)
        pids = sorted(p for pool in warm.pools().values() for p in pool.pids())
        again = evaluate(designs, config, tmp_path / "b", executor=executor)
        assert pids and sorted(p for pool in warm.pools().values() for p in pool.pids()) == pids
    assert again["overall"]["outcomes"] == first["overall"]["outcomes"]
    assert not any(pool.pids() for pool in warm.pools().values())  # closed with the executor, not before


INC_PLAN = "```yaml\ntests:\n  - name: t\n    steps:\n      - drive: {a: 1}\n      - expect: {y: 2}\n```\n"


@pytest.mark.sim
def test_eval_of_an_endpoint(corpus: Path, tmp_path: Path, run_cli: Callable[..., tuple[int, str, str]]) -> None:
    # choice 0 is a plan that passes on golden, choice 1 prose: half the plans pass, half are invalid
    with llm_server.running_server({"texts": [INC_PLAN, "I will not write a plan."]}) as url:
        code, out, err = run_cli(
            "eval",
            "--designs-dir",
            corpus,
            "inc",
            "-o",
            tmp_path / "ev",
            "-G",
            "2",
            "--states",
            "2",
            "--endpoint",
            url,
            "--model",
            "m",
            "--api-key-env",
            "HWTP_TEST_NO_KEY",
        )
    assert code == 0, err
    doc = json.loads((tmp_path / "ev" / "eval.json").read_text())
    o = doc["overall"]
    assert doc["settings"]["policy"] == "openai" and doc["settings"]["model"] == "m"
    assert o["golden_pass_rate"] == 0.5 and o["outcomes"]["invalid"] == o["samples"] / 2
    assert o["pass_at_k"]["golden"] == {"1": 0.5, "2": 1.0}  # per state: n=2, c=1
    assert sum(o["invalid_reasons"].values()) == o["samples"] / 2
    assert o["tokens"]["completion"] > 0 and o["latency_s"]["p50"] is not None
    assert "| invalid-plan reason | samples |" in out
