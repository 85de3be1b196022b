"""The benchmarks in bench/ start from the repository root (as the README runs them) with the
installed hwtp, and their shared repetition helper summarises as documented. No timing is asserted."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / "bench").glob("*.py") if p.name != "reps.py")
NEEDS = {"bench_ray.py": "ray"}  # optional extras a script imports at start


def _reps() -> ModuleType:
    """bench/reps.py, imported once (bench/ is not a package: the scripts find it beside them)."""
    name = "hwtp_bench_reps"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "reps.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclass looks its module up while being made
        spec.loader.exec_module(module)
    return sys.modules[name]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_starts_from_the_repository_root(script: str) -> None:
    """Every import a benchmark makes resolves from the root, and its options parse."""
    if script in NEEDS:
        pytest.importorskip(NEEDS[script])
    done = _bench(f"bench/{script}", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: "), done.stdout[:200]  # nothing measured or printed before


def test_a_benchmark_runs_end_to_end_and_prints_its_spread() -> None:
    done = _bench("bench/bench_advantage.py", "--n", "2000", "--reps", "3", "--core-calls", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("load average at start: ") and lines[-1].startswith("load average at end: ")
    rows = [line for line in lines if line.startswith(("per-group", "vectorised"))]
    assert len(rows) == 6 and all(line.count("..") == 2 for line in rows), rows  # wall and CPU: seconds, speed-up


def test_too_few_repetitions_are_refused() -> None:
    done = _bench("bench/bench_advantage.py", "--reps", "2")
    assert done.returncode == 2
    assert "--reps: at least 3 repetitions, for a spread (got 2)" in done.stderr


def test_spread_summarises_median_and_range() -> None:
    reps = _reps()
    s = reps.spread([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.low, s.high) == (2.5, 1.0, 10.0)
    assert s.show(".1f", "x") == "2.5x (1.0..10.0)"
    with pytest.raises(ValueError):
        reps.spread([])


def test_ratios_are_taken_inside_each_repetition() -> None:
    reps = _reps()
    r = reps.ratios([10.0, 40.0, 9.0], [1.0, 2.0, 3.0])
    assert r.values == (10.0, 20.0, 3.0)
    assert r.median == 10.0  # not median(10, 40, 9) / median(1, 2, 3) = 4.5
    with pytest.raises(ValueError):
        reps.ratios([1.0], [1.0, 2.0])


def test_interleaved_alternates_the_order() -> None:
    reps = _reps()
    calls: list[str] = []

    def run(name: str) -> object:
        return lambda: calls.append(name) or len(calls)

    got = reps.interleaved(3, {"base": run("base"), "hwtp": run("hwtp")})
    assert calls == ["base", "hwtp", "hwtp", "base", "base", "hwtp"]
    assert got == {"base": [1, 4, 5], "hwtp": [2, 3, 6]}


def test_reps_argument_parses() -> None:
    reps = _reps()
    parser = argparse.ArgumentParser()
    reps.add_reps_argument(parser, default=5)
    assert parser.parse_args([]).reps == 5 and parser.parse_args(["--reps", "3"]).reps == 3


def test_private_cache_is_empty_and_restores_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    reps = _reps()
    monkeypatch.setenv("HWTP_CACHE_DIR", "/somewhere/else")
    with reps.private_cache() as cache:
        assert os.environ["HWTP_CACHE_DIR"] == str(cache) and not any(cache.iterdir())
    assert os.environ["HWTP_CACHE_DIR"] == "/somewhere/else" and not cache.exists()
    monkeypatch.delenv("HWTP_CACHE_DIR")
    with reps.private_cache():
        pass
    assert "HWTP_CACHE_DIR" not in os.environ
