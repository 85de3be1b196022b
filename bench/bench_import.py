"""Benchmark: ``hwtp designs import`` throughput, and ``hwtp eval``'s own time per sample.

Import: a corpus of N distinct small designs (combinational and sequential, each with a spec)
written by this script, imported into a fresh folder with an empty hwtp cache of its own
(every design built, its reference plan made and checked on golden), one design at a time
(``-j 1``, the baseline) and in parallel (``-j 2``), interleaved over --reps repetitions after
one unmeasured import that fills ccache; designs/minute of each and the ratio (taken inside a
repetition), median (min..max).

Eval overhead: ``hwtp.evaluation.evaluate.evaluate`` on the imported designs, first with the
offline policy (makes the mutant sets and starts the warm simulator pools of the one executor
every call shares, as a process evaluating every N training steps keeps it), then again in the
same process with those plans replayed (``--policy replay``), then with an OpenAI-compatible
endpoint (the tests' scripted server) answering at once with a short plan, the size a model
writes: the time hwtp spends per sample beyond the policy's own (prompts, plan parsing and
validation, scoring on the warm workers); the replayed and endpoint runs --reps times each,
interleaved. Goal: under 5 ms/sample.

Run: python bench/bench_import.py [--designs 12] [-G 8] [--states 8] [--reps 3]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_llm import _server_helpers  # run as a script: bench/ is on sys.path
from reps import Spread, add_reps_argument, interleaved, load_report, private_cache, ratios, spread

from hwtp.corpus import importer, sources
from hwtp.evaluation.evaluate import EvalConfig, evaluate
from hwtp.rewards import core as reward_core
from hwtp.rtl.design import load_design
from hwtp.run.config import RunConfig
from hwtp.sim.executors.base import Executor


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


def import_rate(src: Path, out: Path, jobs: int) -> tuple[float, importer.ImportSummary]:
    """Import the corpus into ``out`` with an empty hwtp cache of its own: every design really built."""
    candidates = sources.discover([src], sources.Patterns())
    with private_cache():
        start = time.perf_counter()
        summary = importer.import_designs(candidates, out, importer.ImportConfig(jobs=jobs))
        seconds = time.perf_counter() - start
    return seconds, summary


def replayed(designs: list[Any], root: Path, rep: int, config: EvalConfig, executor: Executor) -> dict[str, Any]:
    """``evaluate`` into a fresh folder holding the first evaluation's mutant sets, on ``executor``."""
    folder = root / f"eval-{rep}-{config.run.policy}"
    shutil.copytree(root / "eval-random" / "mutants", folder / "mutants")
    return evaluate(designs, config, folder, executor=executor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--designs", type=int, default=12)
    parser.add_argument("-G", type=int, default=8)
    parser.add_argument("--states", type=int, default=8)
    parser.add_argument("--eval-designs", type=int, default=4)
    add_reps_argument(parser)
    args = parser.parse_args()
    with load_report("hwtp designs import and hwtp eval's own time per sample"):
        report: dict[str, object] = {"designs": args.designs, "cpus": os.cpu_count(), "reps": args.reps}
        with tempfile.TemporaryDirectory(prefix="hwtp-bench-import-") as tmp, contextlib.ExitStack() as stack:
            root = Path(tmp)
            src = write_corpus(root, args.designs)
            out = root / "out"
            import_rate(src, out, 2)  # not measured: fills ccache (kept, as on a CI machine) for both flows
            runs = {"serial (-j 1, baseline)": 1, "parallel (-j 2)": 2}
            count = itertools.count()
            got = interleaved(
                args.reps,
                {label: lambda j=j: import_rate(src, root / f"out-{next(count)}", j) for label, j in runs.items()},
            )
            rates: dict[str, Spread] = {}
            for label, results in got.items():
                imported = {s.count(importer.Status.IMPORTED) for _, s in results}
                rates[label] = spread([60 * args.designs / seconds for seconds, _ in results])
                print(
                    f"import {label:<24} {args.designs} designs ({'/'.join(map(str, sorted(imported)))} imported): "
                    f"{rates[label].show('.1f')} designs/min",
                    flush=True,
                )
            serial, parallel = (rates[label].values for label in runs)
            ratio = ratios(parallel, serial)
            print(f"import parallel/serial ratio: {ratio.show(unit='x')}")
            report["import_designs_per_min"] = {label: r.median for label, r in rates.items()}
            report["import_ratio"] = [round(ratio.median, 2), round(ratio.low, 2), round(ratio.high, 2)]

            # the adders (ports a, y): the endpoint's short plan below fits them all
            names = [f"d{i:03d}" for i in range(0, args.designs, 4)][: args.eval_designs]
            designs = [load_design(out / n) for n in names]
            # one executor for every evaluation, as a process that evaluates every N steps keeps:
            # the first call starts its warm workers, the timed ones find them running
            executor = stack.enter_context(contextlib.closing(reward_core.executor_for(reward_core.settings())))
            first = evaluate(
                designs,
                EvalConfig(RunConfig(samples=args.G, states=args.states, jobs=2)),
                root / "eval-random",
                executor=executor,
            )
            plans = str(root / "eval-random" / "plans")
            replay = EvalConfig(RunConfig(policy="replay", replay_from=plans, samples=args.G, states=args.states))
            # an endpoint answering at once with a short plan, the size an LLM writes (~250 bytes)
            steps = "".join(f"      - drive: {{a: {v}}}\n      - expect: {{y: {v + 1}}}\n" for v in (0, 7, 200))
            plan = "```yaml\ntests:\n" + "".join(f"  - name: t{t}\n    steps:\n{steps}" for t in range(2)) + "```\n"
            helpers = _server_helpers()  # bench_llm's: tests/llm_server.py
            with helpers.running_server({"texts": [plan]}) as url:
                endpoint = EvalConfig(
                    RunConfig(policy="openai", endpoint=url, model="m", samples=args.G, states=args.states)
                )
                rep = itertools.count()
                evals = interleaved(
                    args.reps,
                    {
                        "replay": lambda: replayed(designs, root, next(rep), replay, executor),
                        "endpoint": lambda: replayed(designs, root, next(rep), endpoint, executor),
                    },
                )
            for again in evals["replay"]:
                assert again["overall"]["outcomes"] == first["overall"]["outcomes"], "replay must score the same"
            warm = spread([e["overall"]["hwtp_ms_per_sample"] for e in evals["replay"]])
            short = spread([e["overall"]["hwtp_ms_per_sample"] for e in evals["endpoint"]])
            o = first["overall"]
            print(
                f"eval: {o['samples']} samples on {len(designs)} designs; cold (random policy, pools starting; "
                f"one run): "
                f"{o['hwtp_ms_per_sample']:.2f} ms/sample of hwtp time"
            )
            print(
                f"eval, warm (the random plans replayed): {warm.show(unit=' ms')}/sample "
                f"of hwtp time beyond the policy's (goal < 5 ms) {'OK' if warm.median < 5 else 'ABOVE GOAL'}"
            )
            print(
                f"eval, endpoint with {len(plan)}-byte plans: {short.show(unit=' ms')}/sample of hwtp time beyond "
                f"the endpoint's (goal < 5 ms) {'OK' if short.median < 5 else 'ABOVE GOAL'}"
            )
            report["eval_ms_per_sample_cold"] = o["hwtp_ms_per_sample"]
            report["eval_ms_per_sample_warm"] = [warm.median, warm.low, warm.high]
            report["eval_ms_per_sample_warm_short_plans"] = [short.median, short.low, short.high]
        print(json.dumps(report))


if __name__ == "__main__":
    main()
