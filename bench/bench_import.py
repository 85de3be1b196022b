"""Benchmark: ``hwtp designs import`` throughput, and ``hwtp eval``'s own time per sample.

Import: a corpus of N distinct small designs (combinational and sequential, each with a spec)
written by this script, imported into a fresh folder with a fresh build cache (every design
built, its reference plan made and checked on golden), first one design at a time
(``-j 1``, the baseline), then in parallel (``-j 2``); designs/minute of each and the ratio.

Eval overhead: ``hwtp.evaluation.runner.evaluate`` on the imported designs, first with the
offline policy (makes the mutant sets and starts the warm simulator pools), then again in the
same process with those plans replayed (``--policy replay``), then with an OpenAI-compatible
endpoint (the tests' scripted server) answering at once with a short plan, the size a model
writes: the time hwtp spends per sample beyond the policy's own (prompts, plan parsing and
validation, scoring on the warm workers). Goal: under 5 ms/sample.

Run: python bench/bench_import.py [--designs 12] [-G 8] [--states 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench_llm import _server_helpers  # run as a script: bench/ is on sys.path

from hwtp.corpus import importer, sources
from hwtp.design import load_design
from hwtp.evaluation.runner import EvalConfig, evaluate
from hwtp.runconfig import RunConfig


def write_corpus(root: Path, n: int) -> Path:
    """N distinct designs: adders, xor-masks, counters and shift registers of varying constants."""
    src = root / "src"
    for i in range(n):
        kind = i % 4
        folder = src / f"d{i:03d}"
        folder.mkdir(parents=True)
        if kind == 0:
            text = f"module d{i}(input [7:0] a, output [7:0] y);\n  assign y = a + 8'd{i + 1};\nendmodule\n"
        elif kind == 1:
            text = (
                f"module d{i}(input [7:0] a, input [7:0] b, output [7:0] y);\n"
                f"  assign y = (a ^ b) ^ 8'd{i};\nendmodule\n"
            )
        elif kind == 2:
            text = (
                f"module d{i}(input clk, input rst_n, input en, output reg [7:0] q);\n"
                f"  always @(posedge clk or negedge rst_n)\n"
                f"    if (!rst_n) q <= 8'd{i}; else if (en) q <= q + 8'd{1 + i % 5};\nendmodule\n"
            )
        else:
            text = (
                f"module d{i}(input clk, input rst, input d, output reg [{3 + i % 4}:0] q);\n"
                f"  always @(posedge clk)\n    if (rst) q <= 0; else q <= {{q, d}};\nendmodule\n"
            )
        (folder / f"d{i}.v").write_text(text)
        (folder / "spec.md").write_text(f"Design {i}: see the RTL; kind {kind}.\n")
    return src


def import_rate(src: Path, out: Path, cache: Path, jobs: int) -> tuple[float, importer.ImportSummary]:
    os.environ["HWTP_CACHE_DIR"] = str(cache)  # a fresh build cache: every design really built
    candidates = sources.discover([src], sources.Patterns())
    start = time.perf_counter()
    summary = importer.import_designs(candidates, out, importer.ImportConfig(jobs=jobs))
    seconds = time.perf_counter() - start
    return seconds, summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--designs", type=int, default=12)
    parser.add_argument("-G", type=int, default=8)
    parser.add_argument("--states", type=int, default=8)
    parser.add_argument("--eval-designs", type=int, default=4)
    args = parser.parse_args()
    report: dict[str, object] = {"designs": args.designs, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="hwtp-bench-import-") as tmp:
        root = Path(tmp)
        src = write_corpus(root, args.designs)
        rates = {}
        for label, jobs in (("serial (-j 1, baseline)", 1), ("parallel (-j 2)", 2)):
            seconds, summary = import_rate(src, root / f"out-j{jobs}", root / f"cache-j{jobs}", jobs)
            imported = summary.count(importer.Status.IMPORTED)
            rates[label] = 60 * args.designs / seconds
            print(
                f"import {label:<24} {args.designs} designs ({imported} imported) in {seconds:6.1f} s: "
                f"{rates[label]:6.1f} designs/min"
            )
        ratio = rates["parallel (-j 2)"] / rates["serial (-j 1, baseline)"]
        print(f"import parallel/serial ratio: {ratio:.2f}x")
        report["import_designs_per_min"] = rates
        report["import_ratio"] = round(ratio, 2)

        out = root / "out-j2"
        # the adders (ports a, y): the endpoint's short plan below fits them all
        names = [f"d{i:03d}" for i in range(0, args.designs, 4)][: args.eval_designs]
        designs = [load_design(out / n) for n in names]
        first = evaluate(
            designs, EvalConfig(RunConfig(samples=args.G, states=args.states, jobs=2)), root / "eval-random"
        )
        shutil.copytree(root / "eval-random" / "mutants", root / "eval-replay" / "mutants")  # the same mutant sets
        start = time.perf_counter()
        plans = str(root / "eval-random" / "plans")
        replay = EvalConfig(RunConfig(policy="replay", replay_from=plans, samples=args.G, states=args.states))
        again = evaluate(designs, replay, root / "eval-replay")
        wall = time.perf_counter() - start
        o = again["overall"]
        per_sample = o["hwtp_ms_per_sample"]
        print(
            f"eval: {o['samples']} samples on {len(designs)} designs; cold (random policy, pools starting): "
            f"{first['overall']['hwtp_ms_per_sample']:.2f} ms/sample of hwtp time; warm (replay): "
            f"{per_sample:.2f} ms/sample of hwtp time beyond the policy's {o['seconds']['policy']:.3f} s "
            f"(wall {1000 * wall / o['samples']:.2f} ms/sample; goal < 5 ms) "
            f"{'OK' if per_sample < 5 else 'ABOVE GOAL'}"
        )
        assert again["overall"]["outcomes"] == first["overall"]["outcomes"], "replay must score the same"
        report["eval_ms_per_sample_warm"] = per_sample
        report["eval_ms_per_sample_cold"] = first["overall"]["hwtp_ms_per_sample"]

        # an endpoint answering at once with a short plan, the size an LLM writes (~250 bytes)
        steps = "".join(f"      - drive: {{a: {v}}}\n      - expect: {{y: {v + 1}}}\n" for v in (0, 7, 200))
        plan = "```yaml\ntests:\n" + "".join(f"  - name: t{t}\n    steps:\n{steps}" for t in range(2)) + "```\n"
        shutil.copytree(root / "eval-random" / "mutants", root / "eval-endpoint" / "mutants")
        helpers = _server_helpers()  # bench_llm's: tests/llm_server.py
        with helpers.running_server({"texts": [plan]}) as url:
            endpoint = EvalConfig(
                RunConfig(policy="openai", endpoint=url, model="m", samples=args.G, states=args.states)
            )
            served = evaluate(designs, endpoint, root / "eval-endpoint")
        o = served["overall"]
        print(
            f"eval, endpoint with {len(plan)}-byte plans: {o['hwtp_ms_per_sample']:.2f} ms/sample of hwtp time "
            f"beyond the endpoint's {o['seconds']['policy']:.3f} s (goal < 5 ms) "
            f"{'OK' if o['hwtp_ms_per_sample'] < 5 else 'ABOVE GOAL'}"
        )
        report["eval_ms_per_sample_warm_short_plans"] = o["hwtp_ms_per_sample"]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
