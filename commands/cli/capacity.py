"""Capacity commands (SPEC §3.5): configure and inspect here; observe, admit, reject and
release, which a runner calls per event, in cli/runner.py (listed here in SPEC order)."""

from typing import Annotated, Any

import typer

from quotaledger.cli import readable, runner
from quotaledger.cli.common import (
    AtOpt,
    CommandTable,
    Ctx,
    GoalOpt,
    choice_option,
    request_of,
)
from quotaledger.cli.config_options import ConfigOptions, config_options
from quotaledger.cli.output import Output, Shown, table
from quotaledger.cli.per_event import cooldown_text, coverage_text, dimension_lines, num
from quotaledger.projections.capacity import DIMENSIONS
from quotaledger.services.capacity_state import CapacityStateService
from quotaledger.usecases.capacity_state import (
    ConfigureAnswer,
    ConfigureRequest,
    ConfigView,
    GoalView,
    InspectAnswer,
    InspectRequest,
)

commands = CommandTable()


def register(app: typer.Typer) -> None:
    commands.add_to(app)


@commands(
    "configure",
    example="quotaledger configure --goal g --max-active-cases 4 --quota-tpm 100000 "
    "--target-tpm 90000 --evaluator-reserve-tpm 10000",
)
@config_options(show_defaults=True)
def configure(
    ctx: Ctx,
    goal: GoalOpt,
    config: ConfigOptions,
    remove_limit: Annotated[
        list[str] | None,
        choice_option(
            "--remove-limit", DIMENSIONS, "Remove a dimension of the token gate (repeatable)."
        ),
    ] = None,
    remove_gate: Annotated[
        list[str] | None,
        choice_option("--remove-gate", ("cases", "tokens"), "Remove a gate (repeatable)."),
    ] = None,
    at: AtOpt = None,
) -> Output:
    """Change a goal's case gate and/or token gate: only the flags given change.

    A default never set explicitly follows its source (a target its quota, the case
    target and caps --max-active-cases); the answer lists every change.
    """
    options = dict(locals())
    request = request_of(
        ConfigureRequest,
        {**options.pop("config"), **options},
        remove_limit=remove_limit or [],
        remove_gate=remove_gate or [],
    )
    with ctx.service(CapacityStateService, write=True) as ledger:
        answer = ledger.configure(request)
    return configure_output(request, answer, ctx.shown())


commands.include(runner.commands)  # observe ... release, in their SPEC §3.5 place


@commands("inspect", example="quotaledger inspect --goal g --at 2026-11-29T14:02:00Z")
def inspect(
    ctx: Ctx,
    goal: Annotated[str | None, typer.Option("--goal", help="Only this goal.")] = None,
    at: Annotated[
        str | None, typer.Option("--at", help="Show the state as of this time (RFC 3339).")
    ] = None,
    seq: Annotated[
        int | None,
        typer.Option(
            "--seq",
            help="Show the state as of this record (each goal at its last event up to it).",
        ),
    ] = None,
) -> Output:
    """Show each goal's config, usage, reservations, active runs and what to do next.

    On a corrupt journal, --seq N before the corrupt record still answers.
    """
    request = request_of(InspectRequest, locals())
    with ctx.service(CapacityStateService, write=False, allow_corrupt=seq is not None) as ledger:
        answer = ledger.inspect(request)
    return inspect_output(request, answer, ctx.shown())


# -- human text ------------------------------------------------------------------------


def configure_output(request: ConfigureRequest, answer: ConfigureAnswer, shown: Shown) -> Output:
    return Output(answer, text=configure_text(answer))


def inspect_output(request: InspectRequest, answer: InspectAnswer, shown: Shown) -> Output:
    return Output(answer, text=inspect_text(answer))


def configure_text(answer: ConfigureAnswer) -> str:
    if not answer.ok:
        assert isinstance(answer.reasons, list) and isinstance(answer.detail, list)
        return (
            f"REFUSED configure {answer.goal}: {', '.join(answer.reasons)} "
            f"({'; '.join(answer.detail)})"
        )
    # What a reconfiguration changed (a first configure's values are all new: the
    # summary says them).
    changed = ", ".join(
        f"{k} {_setting(k, old)} -> {_setting(k, new)}"
        for k, (old, new) in answer.changes.items()
        if old is not None
    )
    text = f"configured {answer.goal}: {config_summary(answer.config)}"
    return text + (f"\n  changed: {changed}" if changed else "")


def _setting(field: str, value: Any) -> str:
    """A config value as people read it: a field in seconds (`_s`) as a duration."""
    if field.endswith("_s") and isinstance(value, int | float):
        return readable.duration_text(value)
    return num(value)


def config_summary(config: ConfigView) -> str:
    parts = []
    cases, tokens = config.cases, config.tokens
    if cases:
        parts.append(
            f"cases target {cases.target_active_cases}/max {cases.max_active_cases} "
            f"(baseline <= {cases.max_baseline_cases}, test <= {cases.max_test_cases}, "
            f"reserved test {cases.reserved_test_cases})"
        )
    if tokens and tokens.quota_tpm is not None:
        parts.append(
            f"tokens target {tokens.target_tpm}/quota {tokens.quota_tpm} TPM "
            f"(evaluator reserve {tokens.evaluator_reserve_tpm}, cold start "
            f"{tokens.cold_start_reserve_tpm}, cached weight {tokens.cached_input_weight})"
        )
    for dimension, limit in (tokens.limits if tokens else {}).items():
        parts.append(
            f"{dimension} target {limit.target}/quota {limit.quota} "
            f"(evaluator reserve {limit.evaluator_reserve}, cold start "
            f"{limit.cold_start_reserve})"
        )
    return "; ".join(parts) if parts else "no gate"


def usage_text(goal: GoalView) -> str:
    """The window's tokens by counter, each named when not zero."""
    usage = goal.usage
    parts = [
        f"{label} {num(value)}"
        for label, value in (
            ("uncached", usage.uncached_input),
            ("cached", usage.cached_input),
            ("cache write", usage.cache_write_input),
            ("output", usage.output),
        )
        if value
    ]
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"usage: {num(goal.usage_tpm)} TPM in the last 60 s{detail}"


def inspect_text(answer: InspectAnswer) -> str:
    if not answer.goals:
        return "no goals"
    blocks = []
    for name, goal in answer.goals.items():
        counts = goal.active_counts
        ready = "ready" if goal.admission_ready else "not ready"
        lines = [
            f"goal {name} as of {goal.at}: {ready}, next action {goal.next_action}",
            f"  config: {config_summary(goal.config)}",
            f"  active: {counts.total} (baseline {counts.baseline}, test {counts.test})",
        ]
        if goal.config.tokens is not None:
            lines.append(f"  {usage_text(goal)}")
        lines += ["  " + line for line in dimension_lines(goal.dimensions, None)]
        for dimension, report in goal.provider.items():
            if report.live:
                above = (
                    ", config above provider limit" if report.config_above_provider_limit else ""
                )
                until = "" if report.reset_at is None else f" until {report.reset_at}"
                lines.append(
                    f"  provider {dimension}: {report.remaining} of {report.limit} left"
                    f"{until}{above}"
                )
        lines.append(f"  {coverage_text(goal)}, {cooldown_text(goal.cooldown_until)}")
        if goal.active_runs:
            rows = [
                [
                    r.run,
                    r.case or "-",
                    r.arm or "-",
                    r.class_,
                    num(r.forecast_tpm),
                    r.admitted_at,
                    r.lease_until or "-",
                ]
                for r in goal.active_runs
            ]
            header = ["RUN", "CASE", "ARM", "CLASS", "FORECAST", "ADMITTED_AT", "LEASE_UNTIL"]
            lines.append("    " + table(rows, header).replace("\n", "\n    "))
        blocks.append("\n".join(lines))
    return "\n".join(blocks)
