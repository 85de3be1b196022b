"""``hwtp plan``: test plans from a policy for the states of a mutant set."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from hwtp.cli.commands.options import AT_LEAST_ONE, OUTPUT_FOLDER, POSITIVE, SAMPLES, FiniteFloat, trust_option
from hwtp.env import DEFAULT_API_KEY_VAR, DEFAULT_MAX_RESPONSE_BYTES
from hwtp.errors import ConfigError, PolicyUnavailable
from hwtp.mutators import mutantset
from hwtp.policy.planning import SampleFailure, describe_failures, plan_states, write_plans
from hwtp.policy.policies import PolicySpec, check_policy_name, make_policy
from hwtp.policy.prompt import Templates
from hwtp.run.config import check_url


def resolve_states(mutant_set: mutantset.MutantSet, text: str) -> list[str]:
    """``--states``: ``all`` (golden and the default states), or comma-separated state ids."""
    wanted = None if text == "all" else [s.strip() for s in text.split(",") if s.strip()]
    return [state for state, _ in mutant_set.select(wanted)]


@click.command("plan")
@click.argument("mutdir", type=click.Path(file_okay=False, path_type=Path))
@click.option("-o", "--out", "outdir", required=True, type=OUTPUT_FOLDER)
@click.option("--states", default="all", show_default=True, help="golden, all, or comma-separated mutant ids.")
@click.option("-G", "samples", type=SAMPLES, default=8, show_default=True, help="Plans per state.")
@click.option(
    "--policy", default=None, help="openai, random or replay (default: openai when --endpoint is given, else random)."
)
@click.option("--endpoint", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.")
@click.option("--model", help="Model name the endpoint serves.")
@click.option("--api-key-env", default=DEFAULT_API_KEY_VAR, show_default=True, help="Variable holding the API key.")
@click.option("--temperature", type=FiniteFloat(min=0), default=1.0, show_default=True)
@click.option("--top-p", type=FiniteFloat(min=0, max=1, min_open=True), default=1.0, show_default=True)
@click.option("--max-tokens", type=AT_LEAST_ONE, default=None)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--stop", multiple=True, help="Stop sequence (repeatable).")
@click.option("--structured", is_flag=True, help="Ask for JSON matching the plan schema (response_format).")
@click.option("--concurrency", type=AT_LEAST_ONE, default=8, show_default=True)
@click.option(
    "--timeout", type=POSITIVE, default=300.0, show_default=True, help="Total deadline of one HTTP request, s."
)
@click.option(
    "--retries", type=click.IntRange(min=0), default=5, show_default=True, help="Retries of a failed request."
)
@click.option(
    "--max-response-bytes",
    type=AT_LEAST_ONE,
    default=DEFAULT_MAX_RESPONSE_BYTES,
    show_default=True,
    help="Largest response body read; a longer one fails the request.",
)
@click.option("--refresh", is_flag=True, help="Ignore cached completions (still store new ones).")
@click.option("--from", "replay_from", type=click.Path(file_okay=False, path_type=Path), help="replay: plan folder.")
@click.option(
    "--prompt-template",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder overriding system.md, user.md and/or format.md.",
)
@trust_option
def plan_command(
    mutdir: Path,
    outdir: Path,
    states: str,
    samples: int,
    policy: str | None,
    endpoint: str | None,
    model: str | None,
    api_key_env: str,
    temperature: float,
    top_p: float,
    max_tokens: int | None,
    seed: int,
    stop: tuple[str, ...],
    structured: bool,
    concurrency: int,
    timeout: float,
    retries: int,
    max_response_bytes: int,
    refresh: bool,
    replay_from: Path | None,
    prompt_template: Path | None,
) -> None:
    """Write G test plans per state of MUTDIR (prompt, completion and plan for each)."""
    if samples < 1:
        raise ConfigError("-G must be at least 1")
    name = check_policy_name(policy or ("openai" if endpoint else "random"))
    problem = check_url(endpoint) if name == "openai" and endpoint else None
    if problem:
        raise ConfigError(f"--endpoint: {problem}")
    mutant_set = mutantset.load(mutdir)
    spec = PolicySpec(
        name,
        seed=seed,
        replay_from=replay_from,
        endpoint=endpoint,
        model=model,
        api_key_env=api_key_env,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        stop=stop,
        structured=structured,
        concurrency=concurrency,
        timeout=timeout,
        retries=retries,
        max_response_bytes=max_response_bytes,
        refresh=refresh,
    )
    chosen = make_policy(spec, mutant_set)
    wanted = resolve_states(mutant_set, states)
    failures: list[SampleFailure] = []
    records = plan_states(
        mutant_set,
        wanted,
        samples,
        chosen,
        Templates.load(prompt_template),
        failures,
    )
    index = write_plans(records, outdir)
    errors = Counter("ok" if r.error is None else "invalid" for r in records)
    truncated = sum(1 for r in records if r.generated.finish_reason == "length")
    tokens = sum((r.generated.usage or {}).get("completion_tokens", 0) for r in records if not r.generated.from_cache)
    cut = f", {truncated} truncated (finish_reason=length)" if truncated else ""
    click.echo(
        f"{len(records)} plans ({errors.get('ok', 0)} valid, {errors.get('invalid', 0)} invalid{cut}) "
        f"from policy {name}; {tokens} new completion tokens; wrote {index}"
    )
    if failures:
        raise PolicyUnavailable(
            f"{describe_failures(failures, len(wanted) * samples)}. They have no plan record (nothing to score "
            f"or export); rerun the same command to ask for them again (received samples come from the cache)"
        )
