"""A small real run for the trainer tests (tests/ is on pytest's ``pythonpath``)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: Two shipped designs, two states each: golden and mutants, plans that pass and detect.
DESIGNS = ("counter_en_load", "adder_carry")


def small_run(factory: pytest.TempPathFactory, name: str, *formats: str) -> Path:
    """``hwtp run counter_en_load adder_carry --states 2 -G 2 --format F ... -o DIR``; DIR."""
    from hwtp.cli.main import main

    out = factory.mktemp(name) / "run"
    args = ["run", *DESIGNS, "--states", "2", "-G", "2", "-o", str(out)]
    for fmt in formats:
        args += ["--format", fmt]
    assert main(args) == 0
    return out
