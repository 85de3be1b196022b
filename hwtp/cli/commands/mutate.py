"""``hwtp mutate``, ``hwtp show`` and ``hwtp apply``: make and inspect mutant sets."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from hwtp import yamlio
from hwtp.cli.commands.options import AT_LEAST_ONE, OUTPUT_FOLDER, design_options, resolve_design, trust_option
from hwtp.errors import ConfigError
from hwtp.mutators import engine, mutantset
from hwtp.mutators.mutantset import MutantClass, MutantStatus
from hwtp.mutators.sites import FRONTENDS
from hwtp.plans.format import to_data
from hwtp.progress import Tasks, reporting
from hwtp.sim.cpus import usable_cpus


def _line_range(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    lo, _, hi = text.partition("-")
    try:
        start, end = int(lo), int(hi or lo)
    except ValueError:
        raise ConfigError(f"--lines {text!r}: expected A-B, e.g. 10-40") from None
    if start < 1 or end < start:
        raise ConfigError(f"--lines {text!r}: expected 1 <= A <= B")
    return start, end


@click.command()
@click.argument("design")
@design_options
@trust_option
@click.option(
    "-o",
    "--out",
    "outdir",
    required=True,
    type=OUTPUT_FOLDER,
    help="Mutant directory to write (mutants.json, schemata/, diffs/, golden/).",
)
@click.option("-n", "count", type=int, default=32, show_default=True, help="How many mutants (0: every site).")
@click.option("--operators", default="", help="Comma-separated operator families or names.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--lines", "lines", metavar="A-B", help="Only sites on these source lines.")
@click.option("--since", metavar="GITREV", help="Only sites on lines changed since this git revision.")
@click.option("--include-widths", is_flag=True, help="Also mutate constants that size things.")
@click.option(
    "--frontend",
    type=click.Choice(FRONTENDS),
    default=FRONTENDS[0],
    show_default=True,
    help="Parser that finds the sites: pyslang, or pyverilog for plain Verilog-2001 (pip install 'hwtp[pyverilog]').",
)
@click.option("--depth", type=int, default=1, show_default=True, help="Tree depth: >1 mutates mutants again.")
@click.option("--branching", type=int, default=2, show_default=True, help="Children per mutant per extra level.")
@click.option(
    "--equivalents",
    type=int,
    default=0,
    show_default=True,
    help="Add K semantics-preserving variants of golden (class 'equivalent').",
)
@click.option(
    "--witness-cycles",
    type=int,
    default=2000,
    show_default=True,
    help="Witness-search budget per mutant: clock cycles (input vectors for combinational designs); 0: skip.",
)
@click.option(
    "--eval-timeout",
    type=float,
    default=3.0,
    show_default=True,
    help="Wall-clock s per witness-search evaluation (start-up not counted); a mutant over it is non-terminating.",
)
@click.option(
    "--witness-timeout",
    type=float,
    default=300.0,
    show_default=True,
    help="Wall-clock s for the whole witness search; mutants not searched by then stay unknown.",
)
@click.option(
    "--prefer-killable/--no-prefer-killable",
    default=True,
    show_default=True,
    help="Validate and classify 2N candidates, keep N with provably killable ones first.",
)
@click.option(
    "--formal",
    type=click.Choice(engine.FORMAL_MODES),
    default="auto",
    show_default=True,
    help="Yosys miter after the witness search: proves mutants equivalent or finds a counterexample witness. "
    "auto: the unknown ones when Yosys is installed; unknown: the same, Yosys required; all: every mutant.",
)
@click.option(
    "--formal-depth", type=int, default=20, show_default=True, help="Formal bounded check: cycles after reset."
)
@click.option(
    "--formal-timeout",
    type=float,
    default=10.0,
    show_default=True,
    help="Formal check: CPU seconds per mutant (a wall-clock backstop of 10x + 30 s stops a stuck or starved Yosys).",
)
@click.option("-j", "--jobs", type=AT_LEAST_ONE, default=usable_cpus(), show_default=True)
def mutate(
    design: str,
    top: str | None,
    clock_spec: str | None,
    reset_spec: str | None,
    outdir: Path,
    count: int,
    operators: str,
    seed: int,
    lines: str | None,
    since: str | None,
    include_widths: bool,
    frontend: str,
    depth: int,
    branching: int,
    equivalents: int,
    witness_cycles: int,
    eval_timeout: float,
    witness_timeout: float,
    prefer_killable: bool,
    formal: str,
    formal_depth: int,
    formal_timeout: float,
    jobs: int,
) -> None:
    """Write mutants of DESIGN: validated by Verilator, compiled once as mutant schemata."""
    loaded = resolve_design(design, top, clock_spec, reset_spec)
    config = engine.MutationConfig(
        n=count or None,
        operators=tuple(o.strip() for o in operators.split(",") if o.strip()),
        seed=seed,
        lines=_line_range(lines),
        since=since,
        include_widths=include_widths,
        frontend=frontend,
        jobs=jobs,
        depth=depth,
        branching=branching,
        equivalents=equivalents,
        witness_cycles=witness_cycles,
        eval_timeout=eval_timeout,
        witness_timeout=witness_timeout,
        prefer_killable=prefer_killable,
        formal=formal,
        formal_depth=formal_depth,
        formal_timeout=formal_timeout,
    )
    progress = Tasks()
    with reporting(progress):  # the witness search's rounds
        result = engine.mutate(loaded, config)
    progress.close()
    path = mutantset.write(result, outdir)
    if not result.mutants:
        click.echo(f"{loaded.name}: no mutable site found (with these options); wrote an empty set to {path}")
        return
    valid = result.valid
    rejected = Counter((m.reason or "").split(":")[0] for m in result.mutants if m.status != MutantStatus.VALID)
    click.echo(
        f"{loaded.name}: {len(result.mutants)} candidates, {len(valid)} valid"
        + (f", rejected: {dict(rejected)}" if rejected else "")
    )
    if count and len(result.mutants) < count:
        click.echo(f"note: only {len(result.mutants)} sites match; took all of them")
    classes = Counter(m.klass.value for m in valid)
    killable = classes.get(MutantClass.KILLABLE.value, 0)
    click.echo(
        f"classes: {dict(sorted(classes.items()))}" + (f" ({killable / len(valid):.0%} killable)" if valid else "")
    )
    hung = result.nonterminating
    if hung:
        click.echo(
            f"non-terminating: {len(hung)} ({hung[0].reason}; {', '.join(m.id for m in hung)}): "
            "left out of the default states of hwtp plan, score and run"
        )
    for line in formal_summary(result):
        click.echo(line)
    families = Counter(m.operator.split(".")[0] for m in valid)
    click.echo("families: " + ", ".join(f"{f} {n}" for f, n in sorted(families.items())))
    click.echo(f"wrote {path}")


def formal_summary(result: mutantset.MutantSet) -> list[str]:
    """What the formal check did, and how many mutants it removed from the training states."""
    checked = [m for m in result.valid if m.proof is not None]
    if not checked:
        return []
    classes = Counter(m.klass.value for m in checked)
    methods = Counter(str(m.proof["method"]) for m in checked if m.proved_equivalent and m.proof)
    unknown = Counter(str(m.proof.get("reason", "")).split(":")[0].split(",")[0] for m in checked
                      if m.klass == MutantClass.UNKNOWN and m.proof)
    lines = [f"formal (Yosys): {len(checked)} checked: {dict(sorted(classes.items()))}"]
    if unknown:
        lines.append(f"formal unknown: {dict(unknown)}")
    proved = result.proved_equivalent
    if proved:
        lines.append(
            f"removed from training states: {len(proved)} proved equivalent "
            f"({', '.join(f'{n} by {k}' for k, n in sorted(methods.items()))}; {', '.join(m.id for m in proved)})"
        )
    return lines


@click.command()
@click.argument("mutdir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("mutant_id")
def show(mutdir: Path, mutant_id: str) -> None:
    """Print mutant MUTANT_ID: its diff, classification, formal proof or witness, and diagnostics."""
    mutant_set = mutantset.load(mutdir)
    mutant = mutant_set.get(mutant_id)
    click.echo(mutant_set.diff(mutant), nl=False)  # first: the output stays a patch up to its end
    click.echo(f"# mutant {mutant.id}: {mutant.operator} at {mutant.file}:{mutant.line}:{mutant.col}")
    click.echo(f"status: {mutant.status.value}" + (f" ({mutant.reason})" if mutant.reason else ""))
    click.echo(f"class: {mutant.klass.value}" + (" (not a training state)" if mutant.proved_equivalent else ""))
    if mutant.proof is not None:
        proof = mutant.proof
        fields = ", ".join(f"{k} {proof[k]}" for k in ("method", "depth", "bmc_depth", "seconds", "tool") if k in proof)
        click.echo(f"formal: {fields}")
        if "reason" in proof:
            click.echo(f"formal reason: {proof['reason']}")
    witness = mutant_set.witnesses.get(mutant.id)
    if witness is not None:
        click.echo(f"witness (witnesses/{mutant.id}.yaml):")
        click.echo(yamlio.dump(to_data(witness)), nl=False)


@click.command()
@click.argument("mutdir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("mutant_id")
@click.option(
    "-o",
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="A file for a one-file design, else a folder that receives every source.",
)
def apply(mutdir: Path, mutant_id: str, out: Path) -> None:
    """Write the standalone source of mutant MUTANT_ID (no trace of being a mutant)."""
    mutant_set = mutantset.load(mutdir)
    sources = mutant_set.sources_of(mutant_set.get(mutant_id))
    if len(sources) == 1 and not out.is_dir():
        out.write_text(sources[0].text, encoding="utf-8")
    else:
        for src in sources:
            (out / src.path).parent.mkdir(parents=True, exist_ok=True)
            (out / src.path).write_text(src.text, encoding="utf-8")
    click.echo(f"wrote {out}")
