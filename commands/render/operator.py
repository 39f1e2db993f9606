"""What the operators' readers print (goals, audit, whatif, metrics, validity)."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from msgspec import UnsetType

from quotaledger.projections.reasons import CASE_GATE_REASONS
from quotaledger.render import readable
from quotaledger.render.outcome import EXIT_OK, EXIT_REFUSED
from quotaledger.render.output import Output, Shown, plural, table
from quotaledger.render.per_event import cooldown_text, coverage_text
from quotaledger.render.prometheus import prometheus_text
from quotaledger.usecases.operator import (
    AuditAnswer,
    AuditRequest,
    Explanation,
    GoalsAnswer,
    MetricsAnswer,
    MetricsRequest,
    QueueExplanation,
    RunHost,
    ValidityAnswer,
    WhatifAnswer,
    WhatifRequest,
)


def audit_output(request: AuditRequest, answer: AuditAnswer, shown: Shown) -> Output:
    code = EXIT_OK if answer.ok else EXIT_REFUSED  # both of a queued entry's decisions
    return Output(answer, text=audit_text(answer), exit_code=code)


def whatif_output(request: WhatifRequest, answer: WhatifAnswer, shown: Shown) -> Output:
    ranged = request.since is not None or request.until is not None
    return Output(answer, text=whatif_text(answer, verbose=shown.verbose, ranged=ranged))


def metrics_output(request: MetricsRequest, answer: MetricsAnswer, shown: Shown) -> Output:
    if request.out is not None:
        return Output(answer, text=f"wrote {request.out} ({answer.bytes:,} bytes)")
    return Output(answer, text=prometheus_text(answer))


NEVER = "never (had nothing else happened)"

T = TypeVar("T")


def _n(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    if isinstance(value, int | float):
        return f"{int(value):,}"
    return str(value)


def _given(value: T | UnsetType) -> T:
    """A capacity explanation's member (each is set in a capacity decision's audit)."""
    assert not isinstance(value, UnsetType)
    return value


def _verdict(admitted: bool, reasons: list[str]) -> str:
    return "admitted" if admitted else "refused: " + (", ".join(reasons) or "-")


def _binding_text(ex: Explanation, reasons: list[str]) -> str:
    """The binding constraint, and the token shortfall only beside a token reason: a
    refusal bound by the case gate says so alone, and the token gate's part (if it
    refused too) goes on its own line."""
    binding = ex.binding_constraint
    line = f"binding constraint: {binding or '-'}"
    shortfall = _given(ex.shortfall)
    if not isinstance(shortfall, dict):  # an answer from before dimensions: tpm's alone
        shortfall = {} if ex.shortfall_tpm is None else {"tpm": ex.shortfall_tpm}
    amount = readable.shortfall_text(shortfall, reasons, _n)
    if amount is None:
        return line
    token_reasons = [r for r in reasons if r not in CASE_GATE_REASONS]
    if binding in CASE_GATE_REASONS:
        return f"{line}\nalso refused by the token gate: {', '.join(token_reasons)}, {amount}"
    return f"{line}   {amount}"


def audit_text(answer: AuditAnswer) -> str:
    event, ex = answer.event, answer.explanation
    who = f"run {event.run}"
    if event.run is None:  # a settlement decision
        who = f"agent {_given(event.agent) or '-'}, turn {_given(event.turn) or '-'}"
    recorded, replayed = answer.recorded, answer.replayed
    lines = [
        f"audit of seq {event.seq} {event.kind} at {event.at} (goal {event.goal}, {who})",
        f"  recorded: {_verdict(recorded.admitted, recorded.reasons)}",
        f"  replayed: {_verdict(replayed.admitted, replayed.reasons)}",
    ]
    if answer.reproduced:
        lines.append("REPRODUCED: the same decision function gives the recorded answer.")
    else:
        bar = "!" * 72
        lines += [
            bar,
            "!!  NOT REPRODUCED: the replay differs from the journal.",
            "!!  The code's rules changed, or the log was edited (hashes recomputed).",
            bar,
        ]
        lines += [f"  - {difference}" for difference in answer.differences]
    if not isinstance(ex.settlement, UnsetType):
        lines.append(f"  binding constraint: {ex.binding_constraint or '-'}")
        return "\n".join(lines)
    if not isinstance(ex.queue, UnsetType):
        lines += queue_wait_lines(ex.queue)
    return "\n".join([*lines, "", *_capacity_explanation_lines(ex, recorded.reasons, event.at)])


def queue_wait_lines(wait: QueueExplanation) -> list[str]:
    """A queued entry's wait (SPEC §12.5): held by what, freed by what, when."""
    freed = (
        "time alone" if wait.freed_by is None else (f"seq {wait.freed_by.seq} {wait.freed_by.kind}")
    )
    started = wait.admitted_at or f"not admitted ({wait.left or 'waiting or expired'})"
    lines = [
        f"  queued at {wait.queued_at}, position {wait.position or '-'}, held by "
        f"{', '.join(wait.held_by) or '-'}",
        f"  estimated start {wait.estimated_start_at or '-'}, actual start {started}",
    ]
    if wait.admitted_at is not None:
        lines.append(f"  waited {readable.num(wait.waited_s)} s; freed by {freed}")
    for decision in wait.decisions:
        verdict = "reproduced" if decision.reproduced else "NOT REPRODUCED"
        lines.append(f"  seq {decision.seq} {decision.kind}: {verdict}")
    return lines


def _capacity_explanation_lines(ex: Explanation, reasons: list[str], at: str) -> list[str]:
    usage, cases = _given(ex.usage), _given(ex.active_cases)
    coverage = {
        "last_observation_at": _given(ex.last_observation_at),
        "coverage": ex.coverage,
        "observation_stale": _given(ex.observation_stale),
    }
    dimensions = _given(ex.dimensions)
    tokens = bool(dimensions) or ex.target_tpm is not None  # the token gate is configured
    lines = [_binding_text(ex, reasons)]
    if tokens:
        parts = {"uncached": usage.uncached_input, "cached": usage.cached_input,
                 "output": usage.output}  # fmt: skip
        lines.append(f"usage {_n(ex.usage_tpm)} TPM ({readable.parts_text(parts, _n)})")
        lines += readable.decision_dimension_lines(ex, _n)
    state = [f"{coverage_text(coverage)}"] if tokens else []
    state.append(cooldown_text(ex.cooldown_until, at))
    state.append(
        f"active cases {cases.total} (target {_n(_given(ex.target_active_cases))}, "
        f"max {_n(_given(ex.max_active_cases))})"
    )
    lines += ["; ".join(state), f"earliest admissible at: {ex.earliest_admissible_at or NEVER}"]
    if ex.top_contributors:
        lines += ["", "window composition (top runs by usage):"]
        rows = [
            [
                c.run or "(no run)",
                _n(c.usage_tpm),
                "-" if c.share is None else f"{c.share:.0%}",
                str(c.sample_count),
                "yes" if c.active else "no",
                _n(c.forecast_tpm),
            ]
            for c in ex.top_contributors
        ]
        header = ["RUN", "USAGE_TPM", "SHARE", "SAMPLES", "ACTIVE", "FORECAST"]
        lines.append(table(rows, header))
    reservations = _given(ex.reservations)
    if reservations:
        lines += ["", "reservations (active runs):"]
        rows = [
            [
                r.run,
                r.arm or "-",
                r.run_class,
                _n(r.forecast_tpm),
                r.admitted_at,
                r.lease_until or "-",
            ]
            for r in reservations
        ]
        lines.append(table(rows, ["RUN", "ARM", "CLASS", "FORECAST", "ADMITTED_AT", "LEASE_UNTIL"]))
    return lines


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def goals_text(answer: GoalsAnswer) -> str:
    goals = answer.goals
    if not goals:
        return "no goals"
    rows = [
        [
            name,
            ",".join(g.domains) or "-",
            ",".join(gate for gate, on in msgspec.structs.asdict(g.gates).items() if on) or "-",
            ",".join(g.dimensions) or "-",
            str(g.active_runs),
            g.last_event_at,
            _yes(g.admission_ready),
            g.next_action or "-",
        ]
        for name, g in goals.items()
    ]
    header = ["GOAL", "DOMAINS", "GATES", "DIMENSIONS", "ACTIVE", "LAST_EVENT", "READY"]
    return "\n".join([plural(len(goals), "goal"), table(rows, [*header, "NEXT_ACTION"])])


def validity_text(answer: ValidityAnswer) -> str:
    """The counts by verdict, then a row per run (SPEC §13.2)."""
    counts = ", ".join(f"{verdict} {n:,}" for verdict, n in answer.counts.items())
    head = f"goal {answer.goal}: {plural(len(answer.runs), 'run')} ({counts})"
    if not answer.runs:
        return head
    rows = [
        [
            r.run,
            r.case or "-",
            r.arm or "-",
            r.queued_at or "-",
            r.admitted_at or "-",
            r.released_at or ("active" if r.admitted_at is not None else "-"),
            "-" if r.waited_s is None else readable.num(r.waited_s),
            f"{r.tokens.uncached_input + r.tokens.cached_input + r.tokens.cache_write_input:,}",
            f"{r.tokens.output:,}",
            str(r.rejections),
            _host_cell(r.host),
            r.verdict,
        ]
        for r in answer.runs
    ]
    header = ["RUN", "CASE", "ARM", "QUEUED", "ADMITTED", "RELEASED", "WAITED_S", "INPUT"]
    return "\n".join([head, table(rows, [*header, "OUTPUT", "429S", "HOST", "VERDICT"])])


def _host_cell(host: RunHost | None) -> str:
    """`3 attempts, last failed quota_exhausted, 1 continued` in few characters."""
    if host is None:
        return "-"
    last = host.last_outcome or "running"
    if host.last_failure is not None:
        last += f":{host.last_failure}"
    return f"{host.attempts} att, {last}, {host.continued} cont"


def whatif_text(answer: WhatifAnswer, *, verbose: bool = False, ranged: bool = True) -> str:
    flips = answer.flips
    subject = f"pool {answer.pool}" if isinstance(answer.pool, str) else f"goal {answer.goal}"
    lines = [
        f"whatif for {subject}: {plural(answer.decisions, 'decision')} "
        f"replayed, {plural(len(flips), 'flip')}",
    ]
    if flips:
        rows = [
            [
                str(f.seq),
                f.at,
                f.run if isinstance(f.goal, UnsetType) else f"{f.goal}/{f.run}",
                "admitted" if f.recorded_admitted else "refused",
                "admitted" if f.whatif_admitted else "refused",
                ", ".join(f.whatif_reasons) or "-",
            ]
            for f in flips
        ]
        lines.append(table(rows, ["SEQ", "AT", "RUN", "RECORDED", "WHATIF", "WHATIF_REASONS"]))
    lines += _promotions_text(answer)
    lines += ["", "assumptions:"] + [
        f"  - {a}" for a in stated_assumptions(answer, verbose, ranged)
    ]
    return "\n".join(lines)


def _promotions_text(answer: WhatifAnswer) -> list[str]:
    """The queued entries whose start the replay moves (SPEC §12.5): when each started,
    recorded and replayed (`never`: not within the range)."""
    moved = answer.promotions
    if isinstance(moved, UnsetType) or not moved:
        return []
    rows = [
        [
            str(p.seq),
            p.run,
            p.queued_at,
            p.recorded_admitted_at or "never",
            p.whatif_admitted_at or "never",
            ", ".join(p.whatif_reasons) or "-",
        ]
        for p in moved
    ]
    header = ["SEQ", "RUN", "QUEUED_AT", "RECORDED_START", "WHATIF_START", "WHATIF_REASONS"]
    return ["", f"queued runs that would start otherwise: {len(moved)}", table(rows, header)]


def stated_assumptions(answer: WhatifAnswer, verbose: bool, ranged: bool) -> list[str]:
    """The config changes, the range when one was given, and how many standing
    assumptions (the same for every replay) --verbose would add."""
    if verbose:
        return answer.assumptions
    # `WhatIf.assumptions` lists the config changes first, the range second, then
    # the assumptions every replay makes.
    stated = answer.assumptions[:1]
    if ranged:  # --since / --until given: the range is not the whole history
        stated += answer.assumptions[1:2]
    standing = len(answer.assumptions) - len(stated)
    return [*stated, f"{standing} standing assumptions of every replay: --verbose states them"]
