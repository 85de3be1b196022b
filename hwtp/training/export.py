"""``hwtp export``: scored samples as training batches for external trainers.

Formats (docs/reference/export-formats.md):

- ``jsonl``: the base record, one line per (state, plan) sample: ``prompt`` (chat messages
  exactly as sent), ``completion`` (exactly as received), ``reward``, ``advantage``,
  ``group``, ``design``, ``state``, ``plan``, ``outcome``, plus run metadata;
- ``parquet``: the same records (needs the ``parquet`` extra: pyarrow);
- ``trl`` (GRPO, prompt-only conversational), ``verl`` (RLHFDataset parquet), ``openrlhf``
  (PromptDataset), ``nemo-rl`` (ResponseDataset), ``nemo-gym`` (rows of a NeMo Gym dataset:
  ``responses_create_params`` and the ground truth): prompt datasets for online trainers, one
  row per (design, state) prompt, whose ground truth names what a reward function needs to
  score a completion later (design, state, mutant set hash), never the answer;
- ``trl-sft``: conversational prompt-completion pairs of the plans worth imitating: reward
  at their state's attainable maximum (``detected`` on a mutant, ``passed`` on golden or an
  equivalent mutant), never a timeout or error.

Layout: ``OUT/manifest.json`` beside ``OUT/data/train-NNNNN-of-MMMMM.{jsonl,parquet}``, so
that ``datasets.load_dataset(OUT)`` and ``load_dataset(OUT/data)`` read the shards and never
the manifest. ``--batch-size N`` shards never cut a group in half; the manifest has each
shard's record count and sha256, and the prompt lengths (characters and estimated tokens).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwtp import __version__
from hwtp.errors import ConfigError, OutputError
from hwtp.mutators.mutantset import GOLDEN
from hwtp.outputs import make_folder, staged
from hwtp.plans.files import PlanRecord
from hwtp.scoring.score import INDETERMINATE, Outcome

FORMATS = ("jsonl", "parquet", "trl", "trl-sft", "verl", "openrlhf", "nemo-rl", "nemo-gym")
# verl reads .parquet (or .json) files only; the other trainers read JSON lines through `datasets`.
_SUFFIX = {"parquet": "parquet", "verl": "parquet"}
DATA_DIR = "data"
# Plans worth imitating (trl-sft) in records without a ceiling: the best outcome on the state.
_BEST_OUTCOME = {True: Outcome.PASSED, False: Outcome.DETECTED}  # keyed by "state is golden"
# Token estimate for prompt lengths: one token per 3 characters (code and spec text run at
# 3-4 characters per token in BPE vocabularies, so this errs high) plus 8 per message for
# the chat template's role markers.
CHARS_PER_TOKEN = 3.0
TOKENS_PER_MESSAGE = 8
_ABS_PATH = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+([\w.+-]+)")


@dataclass(frozen=True)
class ExportOptions:
    format: str = "jsonl"
    batch_size: int | None = None
    metadata: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"--format {self.format!r}: valid formats are {', '.join(FORMATS)}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError("--batch-size must be at least 1")


def scrub(value: Any) -> Any:
    """Replace absolute paths in strings by their last component (no local paths in exports)."""
    if isinstance(value, str):
        return _ABS_PATH.sub(lambda m: m.group(1), value)
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def _joined_plan(r: Mapping[str, Any], plans: Mapping[tuple[str, str], PlanRecord]) -> PlanRecord | None:
    """The plan record of sample ``r``, matched on its whole identity (design, mutant set,
    state, plan); a record that disagrees with its score result is refused."""
    key = (str(r["design"]), str(r["plan"]))
    plan = plans.get(key)
    if plan is None:
        if plans:
            raise ConfigError(
                f"no plan record for plan {key[1]} of design {key[0]} in the --plans folders; "
                "give the plan folder of every design that was scored"
            )
        return None
    if plan.state != str(r["state"]):
        raise ConfigError(
            f"plan {key[1]} of design {key[0]} was written for state {plan.state!r} but its score "
            f"result is on state {r['state']!r}: a sample's prompt and reward must be of one state "
            "(score without --full-matrix for training data)"
        )
    theirs, ours = plan.mutant_set, r.get("mutant_set")
    if theirs and ours and theirs != ours:
        raise ConfigError(
            f"plan {key[1]} of design {key[0]} was written for mutant set {str(theirs)[:12]}, "
            f"but it was scored on mutant set {str(ours)[:12]}"
        )
    return plan


def base_records(
    advantaged: Sequence[dict[str, Any]],
    plans: Mapping[tuple[str, str], PlanRecord],
    metadata: dict[str, Any],
) -> list[dict[str, Any]]:
    """Join advantage records with the plan records of ``hwtp plan`` (prompt and completion),
    keyed by (design, plan id). A ``timeout`` or ``error`` sample is indeterminate: exported
    with ``reward`` None and ``indeterminate`` true, never as a reward a trainer would use."""
    out = []
    for r in advantaged:
        plan = _joined_plan(r, plans)
        indeterminate = r["outcome"] in INDETERMINATE
        out.append(
            scrub(
                {
                    "prompt": plan.prompt if plan else None,
                    "completion": plan.completion if plan else None,
                    "reward": None if indeterminate else r["reward"],
                    "ceiling": r.get("ceiling"),
                    "advantage": r["advantage"],
                    "indeterminate": indeterminate,
                    "group": r["group"],
                    "design": r["design"],
                    "state": r["state"],
                    "plan": r["plan"],
                    "sample": plan.sample if plan else None,
                    "outcome": r["outcome"],
                    "detail": r.get("detail"),
                    "mutant_set": r.get("mutant_set", ""),
                    "model": plan.generated.model if plan else None,
                    "policy": plan.policy if plan else None,
                    "meta": metadata,
                }
            )
        )
    return out


def ground_truth(record: dict[str, Any]) -> dict[str, Any]:
    return {"design": record["design"], "state": record["state"], "mutant_set": record["mutant_set"]}


def _truth_text(record: dict[str, Any]) -> str:
    return json.dumps(ground_truth(record), sort_keys=True)


def imitable(record: dict[str, Any]) -> bool:
    """A plan worth imitating (``trl-sft``): its reward is its state's attainable maximum (``ceiling``:
    the detect level on a mutant, the pass level on golden or an equivalent mutant); never an
    indeterminate (timeout, error) sample."""
    if record.get("indeterminate") or record.get("completion") is None or record.get("reward") is None:
        return False
    if record.get("ceiling") is not None:  # the state's attainable maximum, as scored
        return bool(record["reward"] >= record["ceiling"])
    return bool(record["outcome"] == _BEST_OUTCOME[record["state"] == GOLDEN])


def _needs_prompt(record: dict[str, Any]) -> None:
    if not record["prompt"]:
        raise ConfigError(
            f"plan {record['plan']} has no stored prompt: trainer formats need plans from `hwtp plan` "
            "(pass --plans PLANDIR) or a run folder"
        )


def _nemo_split(prompt: list[dict[str, Any]]) -> tuple[str | None, str]:
    """(system, user) of a prompt: NeMo-RL's ResponseDataset holds one user turn, the system prompt is a file."""
    roles = [m.get("role") for m in prompt]
    if roles == ["user"]:
        return None, str(prompt[0]["content"])
    if roles == ["system", "user"]:
        return str(prompt[0]["content"]), str(prompt[1]["content"])
    raise ConfigError(f"nemo-rl: a prompt must be [system, user] or [user] messages, not {roles}")


def prompt_rows(records: Sequence[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """Rows shaped for the trainer ``fmt``: one per (design, state) prompt; ``trl-sft``: one per imitable plan."""
    for r in records:
        _needs_prompt(r)
    if fmt == "trl-sft":
        pairs: dict[tuple[str, str, str], dict[str, Any]] = {}
        for r in records:
            if imitable(r):
                pairs.setdefault((r["design"], r["state"], r["completion"]), r)
        return [
            {"prompt": r["prompt"], "completion": [{"role": "assistant", "content": r["completion"]}]}
            for r in pairs.values()
        ]
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        seen.setdefault((r["design"], r["state"]), r)
    rows = []
    for index, r in enumerate(seen.values()):
        truth = ground_truth(r)
        if fmt == "trl":
            # GRPOTrainer passes every column but prompt/completion to reward functions as keyword lists
            rows.append({"prompt": r["prompt"], "ground_truth": truth, "design": r["design"], "state": r["state"]})
        elif fmt == "verl":
            rows.append(
                {
                    "data_source": f"hwtp/{r['design']}",
                    "prompt": r["prompt"],
                    "ability": "hardware-test-planning",
                    "reward_model": {"style": "rule", "ground_truth": truth},
                    "extra_info": {"index": index, "split": "train", **truth},
                }
            )
        elif fmt == "openrlhf":
            # PromptDataset: input (chat messages with --data.apply_chat_template), label (a string per row)
            rows.append({"input": r["prompt"], "label": _truth_text(r), "datasource": "hwtp"})
        elif fmt == "nemo-rl":
            # ResponseDataset: input/output strings -> messages [user, assistant]; math_hf_data_processor
            # hands the assistant turn to the environment as extra_env_info["ground_truth"]
            _, user = _nemo_split(r["prompt"])
            rows.append({"input": user, "output": _truth_text(r)})
        elif fmt == "nemo-gym":
            # a NeMo Gym run request: the Responses API request (input: the chat messages as sent) and
            # the row's own fields, which its agent hands to the resources server's /verify with the rollout
            rows.append({"responses_create_params": {"input": r["prompt"]}, "ground_truth": truth})
        else:
            raise ConfigError(f"--format {fmt!r} is not a prompt dataset")
    return rows


def nemo_system_prompt(records: Sequence[dict[str, Any]]) -> str | None:
    """The one system prompt of a NeMo-RL export (its ``system_prompt_file``), or None."""
    systems = {_nemo_split(r["prompt"])[0] for r in records if r["prompt"] is not None}
    if len(systems) > 1:
        raise ConfigError("nemo-rl: the prompts have different system messages; NeMo-RL takes one system_prompt_file")
    return next(iter(systems), None)


def _chars(prompt: Any) -> int:
    return sum(len(str(m.get("content", ""))) for m in prompt) if isinstance(prompt, list) else len(str(prompt))


def estimate_tokens(prompt: Any) -> int:
    """Upper-side token estimate of a prompt (see ``CHARS_PER_TOKEN``)."""
    messages = len(prompt) if isinstance(prompt, list) else 1
    return math.ceil(_chars(prompt) / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * messages


def _percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]  # nearest rank


def prompt_lengths(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Lengths of the distinct (design, state) prompts: characters and estimated tokens, max/p50/p95."""
    prompts: dict[tuple[str, str], Any] = {}
    for r in records:
        if r.get("prompt") is not None:
            prompts.setdefault((r["design"], r["state"]), r["prompt"])
    if not prompts:
        return None
    chars = [_chars(p) for p in prompts.values()]
    tokens = [estimate_tokens(p) for p in prompts.values()]
    return {
        "prompts": len(prompts),
        "chars": {"max": max(chars), "p50": _percentile(chars, 0.5), "p95": _percentile(chars, 0.95)},
        "tokens_estimate": {"max": max(tokens), "p50": _percentile(tokens, 0.5), "p95": _percentile(tokens, 0.95)},
        "estimator": f"ceil(chars / {CHARS_PER_TOKEN}) + {TOKENS_PER_MESSAGE} per message",
        # the smallest multiple of 256 that holds every prompt: each trainer's prompt-length setting
        "max_prompt_length": 256 * math.ceil(max(tokens) / 256),
    }


def shard(records: Sequence[dict[str, Any]], batch_size: int | None, key: str = "group") -> list[list[dict[str, Any]]]:
    """Split into shards of about ``batch_size`` records without cutting a group in half."""
    if not batch_size:
        return [list(records)]
    groups: dict[Any, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(r.get(key, id(r)), []).append(r)
    shards: list[list[dict[str, Any]]] = [[]]
    for members in groups.values():
        if shards[-1] and len(shards[-1]) + len(members) > batch_size:
            shards.append([])
        shards[-1].extend(members)
    return [s for s in shards if s]


def _jsonl(rows: Iterable[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def check_format_dependencies(formats: Iterable[str]) -> None:
    """Refuse at once a format whose optional dependency is missing (before any work): every
    format written as parquet (``parquet``, ``verl``) needs pyarrow."""
    parquet = sorted(f for f in formats if _SUFFIX.get(f) == "parquet")
    if parquet:
        try:
            import pyarrow
            import pyarrow.parquet  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                f"--format {', '.join(parquet)} writes parquet, which needs pyarrow: pip install 'hwtp[parquet]'"
            ) from exc


def _parquet(rows: list[dict[str, Any]], path: Path, nested: bool) -> None:
    """Parquet shard; ``nested``: lists and dicts as Arrow lists and structs, else as JSON text."""
    check_format_dependencies(["parquet"])
    # pyarrow is an optional dependency (the parquet extra): imported only when parquet is written
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not nested:
        rows = [{k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()} for r in rows]
    pq.write_table(pa.Table.from_pylist(rows), path)


#: The NeMo Gym configuration a ``nemo-gym`` export writes beside its shards.
NEMO_GYM_CONFIG = "nemo_gym.yaml"
#: Where the configuration says ``hwtp serve`` listens (its default host; the port docs/how-to/serve.md uses).
NEMO_GYM_HOST, NEMO_GYM_PORT = "127.0.0.1", 8000


def nemo_gym_config(out: Path, files: Sequence[str]) -> str:
    """NeMo Gym configuration of a ``nemo-gym`` export: ``hwtp serve`` as the resources server
    ``hwtp_resources_server`` (no ``entrypoint``: NeMo Gym starts only servers that have one, so
    it reaches the one you started at ``host:port``) and NeMo Gym's ``simple_agent`` on it, with
    the export's shards as its train datasets (paths as ``out`` was given)."""
    import yaml

    datasets = [
        # NeMo Gym requires a license on train datasets; the designs' license is their owner's to name
        {
            "name": "hwtp" if i == 0 else f"hwtp_{i}",
            "type": "train",
            "jsonl_fpath": str(out / f),
            "num_repeats": 1,
            "license": "TBD",
        }
        for i, f in enumerate(files)
    ]
    config = {
        "hwtp_resources_server": {
            "resources_servers": {"hwtp": {"host": NEMO_GYM_HOST, "port": NEMO_GYM_PORT, "domain": "coding"}}
        },
        "hwtp_simple_agent": {
            "responses_api_agents": {
                "simple_agent": {
                    "entrypoint": "app.py",
                    "resources_server": {"type": "resources_servers", "name": "hwtp_resources_server"},
                    "model_server": {"type": "responses_api_models", "name": "policy_model"},
                    "datasets": datasets,
                }
            }
        },
    }
    head = (
        "# NeMo Gym: hwtp serve as the resources server. Start it first on the host and port below\n"
        f"# (hwtp serve STATES --port {NEMO_GYM_PORT}), or change them with\n"
        "# ++hwtp_resources_server.resources_servers.hwtp.port=N\n"
        "# license: TBD stands until you name your designs' license (one of NeMo Gym's DatasetConfig.license)\n"
    )
    return head + yaml.safe_dump(config, sort_keys=False)


def write_export(records: Sequence[dict[str, Any]], options: ExportOptions, out: Path) -> Path:
    """Write the export; returns the manifest path. ``out`` is a folder: ``manifest.json`` and ``data/``."""
    base = options.format in ("jsonl", "parquet")
    rows = list(records) if base else prompt_rows(records, options.format)
    key = "group" if base else "_none"
    made = [p for p in (out, out / DATA_DIR) if not p.exists()]
    data = make_folder(out / DATA_DIR)
    try:
        return _write_files(rows, records, options, out, data, base, key)
    except OutputError:
        for folder in reversed(made):  # not at all: the folders this call made go too, when empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _write_files(
    rows: list[dict[str, Any]],
    records: Sequence[dict[str, Any]],
    options: ExportOptions,
    out: Path,
    data: Path,
    base: bool,
    key: str,
) -> Path:
    suffix = _SUFFIX.get(options.format, "jsonl")
    parts = shard(rows, options.batch_size, key)
    entries: list[dict[str, Any]] = []
    # whole or not at all: every file under a temporary name, renamed into place once all are written
    with staged() as files:
        for i, part in enumerate(parts):
            # the Hub's split naming: datasets.load_dataset(out) reads these as split "train", not the manifest
            final = data / f"train-{i:05d}-of-{len(parts):05d}.{suffix}"
            if suffix == "parquet":
                path = files.path(final)
                _parquet(part, path, nested=not base)
            else:
                path = files.write_bytes(final, _jsonl(part))
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            groups = len({r.get("group") for r in part}) if key == "group" else None
            entries.append(
                {"file": f"{DATA_DIR}/{final.name}", "records": len(part), "groups": groups, "sha256": digest}
            )
        manifest = {
            "format": options.format,
            "hwtp_version": __version__,
            "records": sum(e["records"] for e in entries),
            "shards": entries,
            "prompt_length": prompt_lengths(records),
            "metadata": dict(options.metadata),
        }
        if options.format == "nemo-gym":
            files.write_text(out / NEMO_GYM_CONFIG, nemo_gym_config(out, [e["file"] for e in entries]))
            manifest["nemo_gym_config"] = NEMO_GYM_CONFIG
        if options.format == "nemo-rl":
            system = nemo_system_prompt(records)
            if system is not None:
                files.write_text(out / "system_prompt.txt", system)
                manifest["system_prompt_file"] = "system_prompt.txt"
        path = out / "manifest.json"
        files.write_text(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return path
