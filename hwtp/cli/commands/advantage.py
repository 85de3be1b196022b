"""``hwtp advantage`` and ``hwtp export``: advantages from scores, and training batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from hwtp import outputs
from hwtp.cli.commands.options import OUTPUT_FILE, OUTPUT_FOLDER
from hwtp.errors import ConfigError, ScoreError
from hwtp.plans.files import PLAN_INDEX, PlanRecord, read_index
from hwtp.scoring.scheme import SCHEMES, recorded_scheme
from hwtp.training.advantage import PRESETS, advantage_records, describe_zero_share, preset, summarize
from hwtp.training.export import FORMATS, ExportOptions, base_records, check_format_dependencies, write_export


def read_scores(paths: tuple[Path, ...]) -> list[dict[str, Any]]:
    docs = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ScoreError(f"{path}: cannot read: {exc}") from exc
        except ValueError as exc:
            raise ScoreError(f"{path}: not JSON: {exc}") from exc
        docs.extend(data if isinstance(data, list) else [data])
    return docs


def _config(name: str, **overrides: Any) -> Any:
    given = {k: v for k, v in overrides.items() if v is not None}
    if "exclude_outcomes" in given:
        given["exclude_outcomes"] = frozenset(x for x in given["exclude_outcomes"].split(",") if x)
    return preset(name, **given)


def advantage_options(func: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--preset",
                "preset_name",
                default="grpo-smu",
                show_default=True,
                type=click.Choice(sorted(PRESETS)),
                help='Trainer convention (the presets table of the docs, "Rewards and advantages").',
            ),
            click.option(
                "--group-by",
                type=click.Choice(["state", "design", "batch"]),
                default="design",
                show_default=True,
                help="state: plain GRPO; design: GRPO-SMu over the mutant states.",
            ),
            click.option("--baseline", type=click.Choice(["mean", "leave-one-out"])),
            click.option("--scale", type=click.Choice(["none", "group-std", "leave-one-out-std", "batch-std"])),
            click.option("--ddof", type=int),
            click.option("--epsilon", type=float),
            click.option("--epsilon-mode", type=click.Choice(["add", "where-positive"])),
            click.option("--clip", type=float),
            click.option("--singleton", type=click.Choice(["zero", "raw"])),
            click.option("--exclude-outcomes", help="Comma-separated outcomes left out of the statistics."),
            click.option("--dtype", type=click.Choice(["float64", "float32"])),
            click.option(
                "--ceiling",
                type=click.Choice(["relative", "raw"]),
                help="Groups that mix states (design, batch): relative (default) divides each reward by its "
                "state's attainable maximum, so golden's lower ceiling is never signal; raw: rewards as scored.",
            ),
        ]
    ):
        func = option(func)
    return func


def _records(docs: list[dict[str, Any]], preset_name: str, group_by: str, **overrides: Any) -> tuple[list, Any, Any]:
    config = _config(preset_name, **overrides)
    records = advantage_records(docs, config, by=group_by)  # type: ignore[arg-type]  # click.Choice
    hashes = {d.get("design"): d.get("mutant_set", "") for d in docs}
    for r in records:
        r.setdefault("mutant_set", hashes.get(r["design"], ""))
    return records, config, summarize(docs, config)


@click.command("advantage")
@click.argument("scores", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@advantage_options
@click.option("-o", "--out", type=OUTPUT_FILE, help="JSONL: one record per sample.")
def advantage_command(
    scores: tuple[Path, ...], preset_name: str, group_by: str, out: Path | None, **overrides: Any
) -> None:
    """GRPO-SMu (or trainer-preset) advantages for the samples of hwtp score JSON files."""
    records, _config_used, summary = _records(read_scores(scores), preset_name, group_by, **overrides)
    if out:
        outputs.write_text(out, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    click.echo(f"{len(records)} samples, preset {preset_name}, grouped by {group_by}")
    click.echo(describe_zero_share(summary))


def _plan_records(folders: tuple[Path, ...]) -> dict[tuple[str, str], PlanRecord]:
    """Every plan record of the ``hwtp plan`` folders, keyed by (design, plan id)."""
    plans: dict[tuple[str, str], PlanRecord] = {}
    where: dict[tuple[str, str], str] = {}
    for folder in folders:
        index = folder / PLAN_INDEX
        if not index.is_file():
            raise ConfigError(f"--plans {folder}: no {PLAN_INDEX} (not an hwtp plan folder)")
        for lineno, record in read_index(index, ConfigError):
            if not record.design:
                raise ConfigError(
                    f"{index}:{lineno}: not a plan record with 'design' and 'plan'; "
                    "plans written by an older hwtp lack 'design': run hwtp plan again"
                )
            key = (record.design, record.plan)
            if key in plans:
                raise ConfigError(
                    f"{index}:{lineno}: plan {key[1]} of design {key[0]} is also in {where[key]}; "
                    "give each design's plan folder once"
                )
            plans[key], where[key] = record, f"{index}:{lineno}"
    return plans


@click.command("export")
@click.argument("scores", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="jsonl", show_default=True)
@click.option("-o", "--out", required=True, type=OUTPUT_FOLDER, help="Output folder.")
@click.option(
    "--plans",
    "plan_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="hwtp plan output folder(s): source of each sample's prompt and completion.",
)
@click.option("--batch-size", type=click.IntRange(1), help="Records per shard (groups are never split).")
@click.option(
    "--reward-scheme",
    type=click.Choice(SCHEMES),
    help="The reward scheme the scores must have been made with (default: the one they record); "
    "recorded in the manifest.",
)
@advantage_options
def export_command(
    scores: tuple[Path, ...],
    fmt: str,
    out: Path,
    plan_dirs: tuple[Path, ...],
    batch_size: int | None,
    reward_scheme: str | None,
    preset_name: str,
    group_by: str,
    **overrides: Any,
) -> None:
    """Export scored samples (SCORES JSON files) as training batches."""
    check_format_dependencies([fmt])  # a missing optional dependency fails before any work
    docs = read_scores(scores)
    scheme = recorded_scheme(docs, reward_scheme)
    records, _, summary = _records(docs, preset_name, group_by, **overrides)
    metadata = {"preset": preset_name, "group_by": group_by, "reward_scheme": scheme}
    rows = base_records(records, _plan_records(plan_dirs), metadata)
    manifest = write_export(rows, ExportOptions(fmt, batch_size, tuple(metadata.items())), out)
    data = json.loads(manifest.read_text())
    click.echo(f"{data['records']} records in {len(data['shards'])} shard(s), format {fmt}; wrote {manifest}")
    click.echo(describe_zero_share(summary))
