"""Shared fixtures. Simulator tests are marked ``sim``; builds are shared through the build
cache (content-hashed), so each design and mutant set is compiled once per machine, not once
per test: tests that need mutants of a shipped design take them from :func:`mutated` (one
``hwtp mutate -n 32 --seed 0`` per design, hence one schemata build), and Verilator's runtime
library is compiled once for all builds (``hwtp.sim.verilated_runtime``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hwtp.cli.main import main
from hwtp.mutators import engine, mutantset
from hwtp.rtl.design import Design, load_design, shipped_names
from hwtp.sim import procs

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def shipped() -> dict[str, Design]:
    return {name: load_design(name) for name in shipped_names()}


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run ``hwtp ARGS`` in-process; return (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def starve_next_process() -> Callable[[float], threading.Thread]:
    """``starve_next_process(seconds)``: a thread that stops the next process hwtp starts (its
    whole group, SIGSTOP), as a machine giving it no CPU would, and lets it go on after
    ``seconds``; join it after the call under test."""

    def start(seconds: float) -> threading.Thread:
        before = set(procs._live)

        def stop() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                new = [p for p in list(procs._live) if p not in before]
                if new:
                    os.killpg(new[0].pid, signal.SIGSTOP)
                    time.sleep(seconds)
                    with contextlib.suppress(ProcessLookupError):  # killed meanwhile
                        os.killpg(new[0].pid, signal.SIGCONT)
                    return
                time.sleep(0.001)

        thread = threading.Thread(target=stop, daemon=True)
        thread.start()
        return thread

    return start


@pytest.fixture
def data_dir() -> Path:
    return DATA


class _Mutated:
    """One ``hwtp mutate -n 32`` per design per session, shared by every test that needs it
    (under pytest-xdist by every worker: the first makes it under a file lock, the others read it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sets: dict[str, object] = {}

    def __call__(self, name: str) -> object:
        if name not in self.sets:
            folder = self.root / name
            with (self.root / f"{name}.lock").open("w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not (folder / "mutants.json").is_file():
                    result = engine.mutate(load_design(name), engine.MutationConfig(n=32, seed=0, jobs=2))
                    mutantset.write(result, folder)
            self.sets[name] = mutantset.load(folder)
        return self.sets[name]


@pytest.fixture(scope="session")
def mutated(tmp_path_factory: pytest.TempPathFactory) -> _Mutated:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the session's folder, shared by its workers
        root = tmp_path_factory.getbasetemp().parent / "mutants"
        root.mkdir(exist_ok=True)
        return _Mutated(root)
    return _Mutated(tmp_path_factory.mktemp("mutants"))
