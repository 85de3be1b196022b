"""Option values that used to be accepted although wrong (``-j 0``, ``--max-cycles -1``, NaN levels,
a billion plans per state, ``--temperature nan``): each is refused as the command line is read,
exit 2 naming the option and the bound, no traceback, nothing written (``hwtp.yaml``'s numbers:
tests/test_bad_input.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from test_bad_input import refused

Run = Callable[..., tuple[int, str, str]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-j", "0"], "'-j' / '--jobs': 0 is not in the range x>=1"),
        (["-j", "-1"], "'-j' / '--jobs': -1 is not in the range x>=1"),
        (["--max-cycles", "-1"], "'--max-cycles': -1 is not in the range x>=1"),
        (["--max-cycles", "0"], "'--max-cycles': 0 is not in the range x>=1"),
        (["--reward-levels", "0,nan,2"], "'--reward-levels': '0,nan,2': PASS is nan, not a finite number"),
        (["--reward-levels", "0,1,inf"], "DETECT is inf, not a finite number"),
        (["--reward-levels", "0,1"], "expected three numbers INVALID,PASS,DETECT"),
        (["--timeout", "nan"], "'--timeout': 'nan' is not a finite number"),
        (["--startup-timeout", "-1"], "'--startup-timeout'"),
    ],
)
def test_score_options(tmp_path: Path, run_cli: Run, args: list[str], message: str) -> None:
    refused(run_cli("score", tmp_path / "m", "--plans", tmp_path / "p", "--json", tmp_path / "s.json", *args), message)
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-G", "1000000000"], "-G: must be at most 1024 plans per state, got 1000000000"),
        (["--temperature", "nan"], "'--temperature': 'nan' is not a finite number"),
        (["--top-p", "nan"], "'--top-p': 'nan' is not a finite number"),
        (["--timeout", "inf"], "'--timeout'"),
    ],
)
def test_run_options_are_refused_before_a_run_folder_is_written(
    tmp_path: Path, run_cli: Run, args: list[str], message: str
) -> None:
    refused(run_cli("run", "counter_en_load", "-o", tmp_path / "r", "--dry-run", *args), message)
    refused(run_cli("run", "counter_en_load", "-o", tmp_path / "r", *args), message)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-G", "1000000000"], "'-G': 1000000000 is not in the range 1<=x<=1024"),
        (["-G", "0"], "'-G': 0 is not in the range 1<=x<=1024"),
        (["--temperature", "nan"], "'--temperature': 'nan' is not a finite number"),
        (["--concurrency", "0"], "'--concurrency'"),
        (["--retries", "-1"], "'--retries'"),
    ],
)
def test_plan_options(tmp_path: Path, run_cli: Run, args: list[str], message: str) -> None:
    refused(run_cli("plan", tmp_path / "m", "-o", tmp_path / "p", *args), message)
    assert not (tmp_path / "p").exists()


def test_export_batch_size(tmp_path: Path, run_cli: Run) -> None:
    scores = tmp_path / "s.json"
    scores.write_text("[]")
    refused(
        run_cli("export", scores, "-o", tmp_path / "e", "--batch-size", "0"), "'--batch-size': 0 is not in the range"
    )
    assert not (tmp_path / "e").exists()
