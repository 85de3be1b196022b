"""The experiment's data: mutant sets, the train / held-out split of states, short prompts and
the weak plans the policy is warm-started on.

A *state* is golden or one mutant of a design. Each design's valid mutants are split once (a
seeded shuffle, the same for every seed and arm): ``held_out`` of them are never trained on
and only evaluated, the rest (with golden) are the training states. Designs in
``held_out_designs`` contribute no training state at all.

The prompt is short on purpose (a small model's context and a CPU's time). By default
(``prompt="diff"``) it is the design's name and the lines where the state's RTL differs from
golden's (comments and runs of blanks removed): the only part that tells one state of a design
from another, about 30 tokens instead of about 270 for the whole RTL. ``prompt="rtl"`` puts
the whole short RTL in the prompt instead.
Weak plans come from the offline policy (constrained-random stimulus, golden's outputs as
expectations) cut to one test of a few cycles with a single ``expect``: they pass on golden
and detect few mutants, which leaves room to learn.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwtp.errors import ConfigError
from hwtp.mutators import engine, mutantset
from hwtp.mutators.mutantset import GOLDEN, MutantClass, MutantSet
from hwtp.mutators.stimulus import StimulusConfig
from hwtp.plans.format import extract_plan, to_data
from hwtp.policy.policies import PlanRequest, RandomPolicy
from hwtp.rtl.design import SourceFile, load_design

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_BLANKS = re.compile(r"[ \t]+")


@dataclass(frozen=True)
class State:
    """One prompt of the experiment: a state of a design, its ground truth and its prompt."""

    design: str
    state: str
    mutant_set: str  # the set's hash
    prompt: str
    split: str  # "train", "held_out" (a mutant never trained on) or "held_out_design"

    @property
    def truth(self) -> dict[str, str]:
        """The ground truth ``hwtp.rewards`` scores a completion on."""
        return {"design": self.design, "mutant_set": self.mutant_set, "state": self.state}

    def row(self) -> dict[str, Any]:
        """A TRL dataset row (``hwtp export --format trl`` columns, the prompt as plain text)."""
        return {"prompt": self.prompt, "ground_truth": self.truth, "design": self.design, "state": self.state}


@dataclass(frozen=True)
class DataConfig:
    """How states and weak plans are made."""

    mutants: int = 40  # mutants asked of `hwtp mutate` per design
    held_out: int = 16  # held-out mutants per design (fewer when the design has fewer)
    train_mutants: int = 12  # training mutants per design (at most)
    weak_plans: int = 8  # distinct weak plans per design for the warm start (few: a tiny model memorises them)
    cycles: tuple[int, int] = (1, 4)  # stimulus length of a weak plan (inclusive)
    seed: int = 0
    prompt: str = "diff"  # "diff": the lines that differ from golden; "rtl": the whole short RTL


def short_rtl(sources: Sequence[SourceFile]) -> str:
    """The RTL without comments, blank lines and runs of blanks (the code itself is unchanged)."""
    lines = []
    for source in sources:
        text = _COMMENT.sub("", source.text)
        for line in text.splitlines():
            line = _BLANKS.sub(" ", line).strip()
            if line:
                lines.append(line)
    return "\n".join(lines)


#: The prompt styles of :class:`DataConfig`.
PROMPTS = ("diff", "rtl")


def prompt_text(design: str, sources: Sequence[SourceFile]) -> str:
    """The policy's prompt for one state: design name, short RTL, and where the plan starts."""
    return f"design: {design}\n{short_rtl(sources)}\nplan:\n"


def diff_prompt(design: str, sources: Sequence[SourceFile], golden: Sequence[SourceFile]) -> str:
    """The policy's prompt for one state: design name, the short-RTL lines golden has and this
    state has not (``- ``) and the reverse (``+ ``), in order; golden's says ``same``."""
    theirs, ours = short_rtl(golden).splitlines(), short_rtl(sources).splitlines()
    changed = [
        line
        for line in difflib.unified_diff(theirs, ours, lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    body = "\n".join(f"{line[0]} {line[1:]}" for line in changed) if changed else "same"
    return f"design: {design}\n{body}\nplan:\n"


def render_plan(data: dict[str, Any]) -> str:
    """A plan's data as compact YAML (block lists, flow mappings: few tokens, still a plan)."""
    out = ["tests:"]
    for test in data["tests"]:
        out.append(f"- name: {test['name']}")
        out.append("  steps:")
        for step in test["steps"]:
            ((kind, value),) = step.items()
            if isinstance(value, dict):
                inner = ", ".join(f"{k}: {v}" for k, v in value.items())
                out.append(f"  - {kind}: {{{inner}}}")
            else:
                out.append(f"  - {kind}: {value}")
    return "\n".join(out) + "\n"


def weaken(data: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Keep one test, and in it one ``expect`` (picked by ``rng``), dropping the others."""
    test = dict(data["tests"][0])
    expects = [i for i, s in enumerate(test["steps"]) if "expect" in s]
    keep = rng.choice(expects) if expects else -1
    steps = test["steps"] if keep < 0 else test["steps"][: keep + 1]
    test["steps"] = [s for i, s in enumerate(steps) if "expect" not in s or i == keep]
    test["name"] = "t0"
    return {"tests": [test]}


def weak_plans(mutant_set: MutantSet, count: int, cycles: tuple[int, int], seed: int) -> list[str]:
    """``count`` distinct weak plans of the design (each passes on golden by construction)."""
    rng = random.Random(f"weak:{mutant_set.design.name}:{seed}")
    out: list[str] = []
    seen: set[str] = set()
    for attempt in range(4):
        wanted = count - len(out)
        if wanted <= 0:
            break
        policy = RandomPolicy(
            mutant_set,
            seed=seed * 1000 + attempt,
            stimulus=StimulusConfig(tests=1, cycles=rng.randint(*cycles), reset_chance=0.0),
        )
        (row,) = policy.generate([PlanRequest(GOLDEN, [])], wanted * 2)
        for generated in row:
            if generated.text is None:
                continue
            text = render_plan(weaken(to_data(extract_plan(generated.text)), rng))
            if text not in seen:
                seen.add(text)
                out.append(text)
    return out[:count]


@dataclass(frozen=True)
class DesignData:
    """One design's states (in split order) and its weak plans."""

    design: str
    folder: Path
    states: tuple[State, ...]
    plans: tuple[str, ...]

    def split(self, name: str) -> list[State]:
        return [s for s in self.states if s.split == name]


def prepare_design(name: str, root: Path, config: DataConfig, held_out_design: bool = False) -> DesignData:
    """Mutate ``name`` into ``root/NAME`` (a folder ``hwtp.rewards`` finds), split its states and
    make its weak plans."""
    folder = root / name
    if not (folder / mutantset.MUTANTS_JSON).is_file():
        result = engine.mutate(load_design(name), engine.MutationConfig(n=config.mutants, seed=config.seed, jobs=2))
        mutantset.write(result, folder)
    mutant_set = mutantset.load(folder)
    digest = mutant_set.set_hash
    design = mutant_set.design
    # equivalent-looking mutants (no witness) cannot show detection: never held out
    killable = [m for m in mutant_set.valid if m.klass == MutantClass.KILLABLE]
    if not killable:
        raise ConfigError(f"design {name}: no killable mutant among {len(mutant_set.valid)} valid ones")
    order = sorted(killable, key=lambda m: m.id)
    random.Random(f"split:{name}:{config.seed}").shuffle(order)
    n_held = min(config.held_out, max(1, len(order) // 2))
    held, train = order[:n_held], order[n_held : n_held + config.train_mutants]
    states = []

    if config.prompt not in PROMPTS:
        raise ConfigError(f"prompt {config.prompt!r}: expected one of {', '.join(PROMPTS)}")

    def state(sid: str, sources: Sequence[SourceFile], split: str) -> State:
        if config.prompt == "rtl":
            return State(name, sid, digest, prompt_text(name, sources), split)
        return State(name, sid, digest, diff_prompt(name, sources, design.sources), split)

    if held_out_design:
        states.append(state(GOLDEN, design.sources, "held_out_design"))
        states += [state(m.id, mutant_set.sources_of(m), "held_out_design") for m in held]
    else:
        states.append(state(GOLDEN, design.sources, "train"))
        states += [state(m.id, mutant_set.sources_of(m), "train") for m in train]
        states += [state(m.id, mutant_set.sources_of(m), "held_out") for m in held]
    plans = weak_plans(mutant_set, config.weak_plans, config.cycles, config.seed)
    return DesignData(name, folder, tuple(states), tuple(plans))


def sft_rows(designs: Sequence[DesignData], per_state: int, seed: int) -> list[tuple[str, str]]:
    """(prompt, completion) pairs: each training state with ``per_state`` of its design's weak
    plans (a weak plan does not depend on the state: it passes golden and rarely detects)."""
    rng = random.Random(f"sft:{seed}")
    rows = []
    for d in designs:
        for s in d.split("train"):
            for plan in rng.sample(list(d.plans), min(per_state, len(d.plans))):
                rows.append((s.prompt, plan))
    rng.shuffle(rows)
    return rows
