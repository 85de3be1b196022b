"""Each trainer export loaded as that trainer loads it, unchanged (two designs, synthetic scores).

The loaders are read from each trainer's source (docs/reference/export-formats.md); without the trainer
installed, its reads are emulated field by field: verl ``verl/utils/dataset/rl_dataset.py``
(RLHFDataset), OpenRLHF ``openrlhf/datasets/utils.py`` (blending_datasets) and
``openrlhf/datasets/prompts_dataset.py`` (PromptDataset), NeMo-RL
``nemo_rl/data/datasets/response_datasets/response_dataset.py`` (ResponseDataset) and
``nemo_rl/data/processors.py`` (math_hf_data_processor). TRL's own data utilities run when
``trl`` is installed (``pip install 'hwtp[trainers]'``).
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hwtp.training.export import ExportOptions, write_export

datasets = pytest.importorskip("datasets")
pytest.importorskip("pyarrow")

#: the documentation page whose snippets load each format (was the README's "Export formats")
PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "export-formats.md"
SYSTEM = "You write hardware test plans."


def _records() -> list[dict[str, Any]]:
    """Base records of two designs, three states each, three samples per state."""
    out = []
    for design, mutant_set in (("fifo_sync", "a" * 64), ("uart_tx", "b" * 64)):
        for state in ("golden", "m0001", "m0002"):
            ceiling = 1.0 if state == "golden" else 2.0
            prompt = [{"role": "system", "content": SYSTEM},
                      {"role": "user", "content": f"Spec of {design}.\n```verilog\nmodule {design}; // {state}\n```"}]
            for sample, reward in enumerate((0.0, 1.0, 2.0 if state != "golden" else 1.0)):
                outcome = {0.0: "golden_fail", 1.0: "passed", 2.0: "detected"}[reward]
                out.append({
                    "prompt": prompt, "completion": f"tests:\n  - name: t{sample}  # {design} {state}",
                    "reward": reward, "ceiling": ceiling, "advantage": reward - 1.0, "indeterminate": False,
                    "group": f"{design}/{state}", "design": design, "state": state, "plan": f"{state}-s{sample:02d}",
                    "sample": sample, "outcome": outcome, "detail": None, "mutant_set": mutant_set,
                    "model": "m", "policy": "openai", "meta": {"preset": "grpo-smu"},
                })
    # a timeout on a mutant is indeterminate: never a plan worth imitating
    out.append({**out[-1], "plan": "m0002-s03", "sample": 3, "outcome": "timeout", "reward": None,
                "indeterminate": True, "completion": "tests: []  # timed out"})
    return out


STATES = {(d, s) for d in ("fifo_sync", "uart_tx") for s in ("golden", "m0001", "m0002")}


def _export(root: Path, fmt: str, batch_size: int | None = None) -> Path:
    out = root / fmt
    write_export(_records(), ExportOptions(fmt, batch_size, (("preset", "grpo-smu"),)), out)
    return out


def _manifest(out: Path) -> dict[str, Any]:
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(autouse=True)
def _hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _tokenizer() -> Any:
    """A tokenizer built here (no hub): word-level vocabulary and a chat template."""
    pytest.importorskip("transformers", reason="the trainers extra (transformers) is not installed")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {"[UNK]": 0, "[PAD]": 1, "<|im_start|>": 2, "<|im_end|>": 3}
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="<|im_end|>",
        chat_template=(
            "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
        ),
    )


def _loaded_by_folder(folder: Path) -> Any:
    return datasets.load_dataset(str(folder))["train"]


# -- layout: nothing but shards is read as data --------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "trl", "trl-sft", "verl", "openrlhf", "nemo-rl", "nemo-gym"])
def test_folder_loads_shards_not_the_manifest(tmp_path: Path, fmt: str) -> None:
    out = _export(tmp_path, fmt, batch_size=4)
    manifest = _manifest(out)
    assert len(manifest["shards"]) > 1 and all(e["file"].startswith("data/") for e in manifest["shards"])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["data", "manifest.json", *{"nemo-rl": ["system_prompt.txt"], "nemo-gym": ["nemo_gym.yaml"]}.get(fmt, [])])
    for folder in (out, out / "data"):  # load_dataset(OUT) and load_dataset(OUT/data) both see the shards only
        ds = _loaded_by_folder(folder)
        assert len(ds) == manifest["records"]
        assert "shards" not in ds.column_names and "hwtp_version" not in ds.column_names
    lengths = manifest["prompt_length"]
    assert lengths["prompts"] == len(STATES) and lengths["chars"]["max"] >= lengths["chars"]["p95"]
    assert lengths["max_prompt_length"] % 256 == 0 and lengths["max_prompt_length"] >= lengths["tokens_estimate"]["max"]


# -- verl: RLHFDataset -----------------------------------------------------------------------


def test_verl_rlhfdataset_reads(tmp_path: Path) -> None:
    out = _export(tmp_path, "verl", batch_size=3)
    files = [str(out / e["file"]) for e in _manifest(out)["shards"]]
    # RLHFDataset._read_files_and_tokenize: .parquet files, one load_dataset each, concatenated
    assert all(f.endswith(".parquet") for f in files)
    frame = datasets.concatenate_datasets([datasets.load_dataset("parquet", data_files=f)["train"] for f in files])
    assert len(frame) == len(STATES)
    seen, indexes = set(), []
    for i in range(len(frame)):
        row = frame[i]  # __getitem__: row_dict = self.dataframe[item]
        messages = row["prompt"]  # _build_messages: example[prompt_key], a list of {role, content}
        assert [m["role"] for m in messages] == ["system", "user"] and messages[0]["content"] == SYSTEM
        indexes.append(row.get("extra_info", {}).get("index", 0))
        # reward managers: non_tensor_batch["reward_model"]["ground_truth"], data_source, extra_info
        truth = row["reward_model"]["ground_truth"]
        assert set(truth) == {"design", "state", "mutant_set"} and row["reward_model"]["style"] == "rule"
        assert row["data_source"] == f"hwtp/{truth['design']}" and row["ability"]
        assert row["extra_info"]["state"] == truth["state"]
        seen.add((truth["design"], truth["state"]))
        assert "tests:" not in json.dumps(row)
    assert seen == STATES and sorted(indexes) == list(range(len(STATES)))


def test_verl_overlong_filter_tokenizes_the_prompt(tmp_path: Path) -> None:
    tokenizer = _tokenizer()
    out = _export(tmp_path, "verl")
    frame = datasets.load_dataset("parquet", data_files=str(out / _manifest(out)["shards"][0]["file"]))["train"]
    # maybe_filter_out_long_prompts: len(tokenizer.apply_chat_template(doc[prompt_key], add_generation_prompt=True))
    kept = frame.filter(lambda doc: 0 < len(tokenizer.apply_chat_template(doc["prompt"], add_generation_prompt=True,
                                                                           tokenize=True)["input_ids"]) <= 1024)
    assert len(kept) == len(STATES)


# -- OpenRLHF: blending_datasets + PromptDataset ----------------------------------------------


def test_openrlhf_prompt_dataset_reads(tmp_path: Path) -> None:
    out = _export(tmp_path, "openrlhf", batch_size=2)
    folder = out / "data"  # --data.prompt_dataset
    # blending_datasets on a folder: load_from_disk fails (not save_to_disk), then load_dataset(folder)
    with pytest.raises(FileNotFoundError):
        datasets.load_from_disk(str(folder))
    data = datasets.load_dataset(str(folder), data_dir=None)
    ds = data["train"]  # --data.prompt_split train
    assert len(ds) == len(STATES)
    for row in ds:
        # preprocess_data with --data.apply_chat_template: data[input_key] is a list of messages
        chat = row["input"]
        assert isinstance(chat, list) and [m["role"] for m in chat] == ["system", "user"]
        label = row["label"]  # --data.label_key label: a string, handed to reward_func(queries, prompts, labels)
        assert isinstance(label, str) and set(json.loads(label)) == {"design", "state", "mutant_set"}
        assert row.get("datasource", "default") == "hwtp"


def test_openrlhf_chat_template(tmp_path: Path) -> None:
    tokenizer = _tokenizer()
    out = _export(tmp_path, "openrlhf")
    row = datasets.load_dataset(str(out / "data"))["train"][0]
    prompt = tokenizer.apply_chat_template(row["input"], tokenize=False, add_generation_prompt=True)
    assert prompt.startswith("<|im_start|>system\n" + SYSTEM) and prompt.endswith("<|im_start|>assistant\n")


# -- NeMo-RL: ResponseDataset + math_hf_data_processor ---------------------------------------


def test_nemo_rl_response_dataset_reads(tmp_path: Path) -> None:
    out = _export(tmp_path, "nemo-rl")
    # load_dataset_from_path(data_path): a folder has no file suffix, so load_dataset(data_path)
    raw = datasets.load_dataset(str(out / "data"))["train"]
    assert "messages" not in raw.column_names
    # ResponseDataset.format_data (input_key "input", output_key "output")
    ds = raw.map(lambda d: {"messages": [{"role": "user", "content": d["input"]},
                                         {"role": "assistant", "content": d["output"]}], "task_name": "hwtp"},
                 remove_columns=raw.column_names)
    system = (out / "system_prompt.txt").read_text()  # data.default.system_prompt_file
    by_state = {(r["design"], r["state"]): r["prompt"] for r in _records()}
    seen = set()
    for datum in ds:
        # math_hf_data_processor: problem = messages[0], extra_env_info = {"ground_truth": messages[1]}
        problem = datum["messages"][0]["content"]
        extra_env_info = {"ground_truth": datum["messages"][1]["content"]}
        truth = json.loads(extra_env_info["ground_truth"])
        assert set(truth) == {"design", "state", "mutant_set"}
        # prompt_file null: the messages rebuilt are exactly the ones hwtp sent
        rebuilt = [{"role": "system", "content": system}, {"role": "user", "content": problem}]
        assert rebuilt == by_state[(truth["design"], truth["state"])]
        seen.add((truth["design"], truth["state"]))
    assert seen == STATES


# -- TRL: prompt-only (GRPO) and prompt-completion (SFT) conversational -----------------------


def test_trl_grpo_prompt_only(tmp_path: Path) -> None:
    out = _export(tmp_path, "trl")
    ds = datasets.load_dataset(str(out / "data"), split="train")
    assert len(ds) == len(STATES)
    for row in ds:
        assert [m["role"] for m in row["prompt"]] == ["system", "user"] and "completion" not in row
        # GRPOTrainer: every column but prompt/completion/completion_ids is a reward-function kwarg
        kwargs = {k: v for k, v in row.items() if k not in ("prompt", "completion", "completion_ids")}
        assert set(kwargs["ground_truth"]) == {"design", "state", "mutant_set"}
        assert "tests:" not in json.dumps(row)


def test_trl_sft_prompt_completion(tmp_path: Path) -> None:
    out = _export(tmp_path, "trl-sft")
    ds = datasets.load_dataset(str(out / "data"), split="train")
    # worth imitating: reward at the state's ceiling (detected on a mutant, passed on golden), no timeout
    best = {(r["prompt"][1]["content"], r["completion"]) for r in _records()
            if not r["indeterminate"] and r["reward"] == r["ceiling"]}
    got = {(row["prompt"][1]["content"], row["completion"][0]["content"]) for row in ds}
    assert got == best and len(ds) == len(best)
    assert all(row["completion"][0]["role"] == "assistant" and len(row["completion"]) == 1 for row in ds)
    assert set(ds.column_names) == {"prompt", "completion"}


def test_trl_data_utils(tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="the trainers extra (trl) is not installed")
    from trl.data_utils import is_conversational, maybe_apply_chat_template

    tokenizer = _tokenizer()
    grpo = datasets.load_dataset(str(_export(tmp_path, "trl") / "data"), split="train")
    sft = datasets.load_dataset(str(_export(tmp_path, "trl-sft") / "data"), split="train")
    for row in grpo:
        assert is_conversational(row)
        text = maybe_apply_chat_template(row, tokenizer)
        assert text["prompt"].startswith("<|im_start|>system") and text["prompt"].endswith("assistant\n")
    for row in sft:
        assert is_conversational(row)
        text = maybe_apply_chat_template(row, tokenizer)
        assert text["completion"].startswith(row["completion"][0]["content"])


# -- docs: each format's snippet runs on an export ---------------------------------------------


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert text.startswith("# Export formats\n"), PAGE
    return text


def _blocks(lang: str) -> list[str]:
    return [textwrap.dedent(b) for b in re.findall(rf"```{lang}\n(.*?)```", _section(), flags=re.S)]


@pytest.fixture
def run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``runs/demo/export/FORMAT`` for every format, as ``hwtp run -o runs/demo`` writes them."""
    for fmt in ("jsonl", "parquet", "trl", "trl-sft", "verl", "openrlhf", "nemo-rl"):
        _export(tmp_path / "runs" / "demo" / "export", fmt)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_docs_python_snippets_run(run_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = _blocks("python")
    formats = {m for b in blocks for m in re.findall(r"runs/demo/export/([\w-]+)", b)}
    assert formats == {"jsonl", "parquet", "trl", "trl-sft", "verl", "openrlhf", "nemo-rl"}
    for block in blocks:
        namespace: dict[str, Any] = {}
        exec(compile(block, str(PAGE), "exec"), namespace)  # the page's own snippet
        if "reward_arguments" in namespace:  # called with the columns GRPOTrainer passes
            ds = namespace["ds"]
            received = namespace["reward_arguments"](
                prompts=ds["prompt"][:2], completions=[[{"role": "assistant", "content": "tests: []"}]] * 2,
                completion_ids=[[0], [0]], ground_truth=ds["ground_truth"][:2], design=ds["design"][:2],
                state=ds["state"][:2])
            assert received == list(zip(ds["design"][:2], ds["state"][:2], strict=True))
    assert "hwtp/" in capsys.readouterr().out


def test_docs_trainer_commands(run_folder: Path) -> None:
    """The verl/OpenRLHF command lines name the trainers' current flags and existing paths."""
    bash = "\n".join(_blocks("bash")).replace("\\\n", " ")
    words = shlex.split(bash, comments=True)
    verl = {w.split("=", 1)[0]: w.split("=", 1)[1] for w in words if "=" in w and not w.startswith("-")}
    assert Path(verl["data.train_files"]).is_file() and verl["data.train_files"].endswith(".parquet")
    assert {"data.max_prompt_length", "data.filter_overlong_prompts", "reward.custom_reward_function.path",
            "reward.custom_reward_function.name", "data.prompt_key"} <= set(verl)
    # verl 0.9 reads reward settings under reward.* only: the top-level keys would be ignored
    assert not {"custom_reward_function.path", "reward_model.reward_manager"} & set(verl)
    flags = {w: words[i + 1] if i + 1 < len(words) else "" for i, w in enumerate(words) if w.startswith("--")}
    assert Path(flags["--data.prompt_dataset"]).is_dir()
    assert flags["--data.input_key"] == "input" and flags["--data.label_key"] == "label"
    assert {"--data.apply_chat_template", "--reward.remote_url", "--data.max_len", "--rollout.max_new_tokens"} <= set(
        flags)
    yaml = pytest.importorskip("yaml")
    (config,) = [yaml.safe_load(b) for b in _blocks("yaml")]
    train, default = config["data"]["train"], config["data"]["default"]
    assert train["dataset_name"] == "ResponseDataset" and Path(train["data_path"]).is_dir()
    assert (train["input_key"], train["output_key"]) == ("input", "output")
    assert Path(default["system_prompt_file"]).is_file() and default["prompt_file"] is None
    assert default["processor"] == "math_hf_data_processor"
    assert config["policy"]["max_total_sequence_length"] > 0
