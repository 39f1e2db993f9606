"""What a runner's per-event commands print (observe, admit, reject, release)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from msgspec import UNSET, UnsetType

from quotaledger.projections import capacity as cap
from quotaledger.projections import reasons as R
from quotaledger.render import readable
from quotaledger.render.output import Output, Shown
from quotaledger.usecases.capacity import (
    AdmitAnswer,
    AdmitRequest,
    ObserveAnswer,
    RejectAnswer,
    ReleaseAnswer,
    ReleaseRequest,
)

if TYPE_CHECKING:  # inspect's views: a runner's per-event command never loads them
    from quotaledger.usecases.capacity_state import DimensionView, GoalView


def admit_output(request: AdmitRequest, answer: AdmitAnswer, shown: Shown) -> Output:
    return Output(answer, text=admit_text(answer, request.run))


def release_output(request: ReleaseRequest, answer: ReleaseAnswer, shown: Shown) -> Output:
    run = request.run
    if answer.released:
        text = f"released {run}" + promoted_text(answer.promoted)
    elif answer.dequeued is True:
        text = f"{run} was queued, not active: out of the queue" + promoted_text(answer.promoted)
    else:
        text = f"{run} is not active ({', '.join(answer.reasons)}); nothing appended"
    return Output(answer, text=text)


num = readable.num


def observe_text(answer: ObserveAnswer) -> str:
    window = f"usage {num(answer.usage_tpm)} TPM in the last 60 s ({answer.coverage})"
    if not answer.ok:
        return conflict_text("observe", answer.goal, answer.request_id, answer.event.seq)
    if answer.idempotent is True:
        text = (
            f"replay of request {answer.request_id} (seq {answer.event.seq}, observed at "
            f"{answer.event.at}); nothing appended: {window}"
        )
    else:
        text = f"observed {answer.goal}: {window}"
    if answer.provider:
        text += f"; provider reports {provider_summary(answer.provider)}"
    if answer.lease_until:
        text += f"; lease of {answer.run} until {answer.lease_until}"
    return text


def reject_text(answer: RejectAnswer) -> str:
    if not answer.ok:
        return conflict_text("reject", answer.goal, answer.request_id, answer.event.seq)
    cooldown = (
        f"cooldown {readable.duration_text(answer.cooldown_s)} until {answer.cooldown_until} "
        f"(streak {answer.streak}" + (", clamped" if answer.clamped else "") + ")"
    )
    if answer.idempotent is True:
        return (
            f"replay of request {answer.request_id} (seq {answer.event.seq}, rejected at "
            f"{answer.event.at}); nothing appended: {cooldown}"
        )
    return f"rejection recorded for {answer.goal}: {cooldown}"


def conflict_text(command: str, goal: str, request_id: Any, seq: int) -> str:
    return (
        f"REFUSED {command} {goal}: {R.REQUEST_ID_CONFLICT} (request {request_id} was "
        f"recorded at seq {seq} with another payload); nothing appended"
    )


def provider_summary(provider: cap.ProviderReport) -> str:
    """`rpm 499/500 left, tpm 150000/200000 left`: what each reported dimension has left."""
    return ", ".join(
        f"{dimension} {num(report.remaining)}/{num(report.limit)} left"
        for dimension, report in provider.items()
    )


def cooldown_text(until: str | None, at: str | None) -> str:
    """A provider cooldown as people read it at `at` (the time the text describes):
    when it ends, that it has ended (it holds while `at < until`), or that there is
    none."""
    if until is None:
        return "no cooldown"
    return f"cooldown until {until}" if at is None or at < until else f"cooldown ended {until}"


def coverage_text(
    figures: cap.Figures | GoalView | Mapping[str, Any], *, with_last: bool = False
) -> str:
    """Coverage as people read it: a goal never observed has no stale observation,
    it has none at all (what usage_observation_stale then means). A mapping: the
    three values picked out of an answer that may lack them (audit's explanation)."""
    if isinstance(figures, Mapping):
        last, coverage = figures["last_observation_at"], figures["coverage"]
        stale = figures["observation_stale"]
    else:
        last, coverage = figures.last_observation_at, figures.coverage
        stale = figures.observation_stale
    if last is None:
        return "no usage observed yet (observe before admitting)"
    text = f"coverage {coverage}" + (" (stale)" if stale else "")
    return text + (f", last observation {last}" if with_last else "")


def admit_text(answer: AdmitAnswer, run: str) -> str:
    if answer.cancelled is not UNSET or answer.queued is True:
        return queue_text(answer, run)
    prefix = "would be " if answer.dry_run else ""
    if answer.admitted:
        receipt = answer.receipt
        assert not isinstance(receipt, UnsetType)
        cases = receipt.active_cases
        bits = []
        if receipt.target_active_cases is not None:
            bits.append(f"slot {cases.total + 1}/{receipt.target_active_cases}")
        if receipt.target_tpm is not None:
            bits.append(
                f"load {num(receipt.load_tpm)}/{receipt.target_tpm} TPM, "
                f"forecast {num(receipt.forecast_tpm)}"
            )
        for name, d in receipt.dimensions.items():
            if name in cap.DAILY_DIMENSIONS:  # what the run may spend in the day
                bits.append(f"{name} load {num(d.load)}/{d.target}, forecast {num(d.forecast)}")
        bits += spend_bits(receipt.spend)
        bits += pool_bits(receipt.pool)
        detail = ", ".join(bits) or "no gate limits it"
        if answer.idempotent and answer.promoted is not UNSET:
            return f"admitted {run} from the queue (seq {receipt.seq})"
        if answer.idempotent:
            return f"admitted {run} again (replay of seq {receipt.seq}; nothing appended)"
        return f"{prefix}admitted {run} ({detail})" + promoted_text(answer.promoted)
    assert not isinstance(answer.figures, UnsetType) and not isinstance(answer.reasons, UnsetType)
    head = f"{'WOULD BE ' if prefix else ''}REFUSED {run}: {', '.join(answer.reasons)}"
    return head + "\n  " + figures_text(answer.figures, answer.at) + promoted_text(answer.promoted)


def queue_text(answer: AdmitAnswer, run: str) -> str:
    """A cancel's answer, or where a queued run stands: `QUEUED r7: position 2 (behind
    r3), estimated start ..., expires ...`."""
    if answer.cancelled is True:
        return f"cancelled {run}: out of the queue" + promoted_text(answer.promoted)
    if answer.cancelled is False:
        return f"{run} is not queued ({answer.reason}); nothing appended"
    assert not isinstance(answer.reasons, UnsetType)
    ahead = answer.ahead if isinstance(answer.ahead, list) else []
    behind = f" (behind {', '.join(a.run for a in ahead[-3:])})" if ahead else ""
    estimate = answer.estimated_start_at
    start = f"estimated start {estimate}" if isinstance(estimate, str) else "no estimate"
    return (
        f"QUEUED {run}: position {answer.position}{behind}, {start}, expires "
        f"{answer.expires_at}\n  held by {', '.join(answer.reasons)}"
        + promoted_text(answer.promoted)
    )


def promoted_text(promoted: Any) -> str:
    """The runs a writer's transaction admitted from the queue (SPEC §12.2)."""
    if not isinstance(promoted, list) or not promoted:
        return ""
    return "\n  promoted from the queue: " + ", ".join(f"{p.goal}/{p.run}" for p in promoted)


def spend_bits(spend: cap.SpendFigures | UnsetType) -> list[str]:
    """Each capped unit: `spent $0.432 + reserved $0 + forecast $0.15 of cap $0.6`."""
    if isinstance(spend, UnsetType):
        return []
    bits = []
    for unit, s in spend.items():
        sign = "$" if unit == "usd" else ""
        forecast = "" if s.forecast is None else f" + forecast {sign}{num(s.forecast)}"
        bits.append(
            f"spent {sign}{num(s.spent)} + reserved {sign}{num(s.reserved)}{forecast} "
            f"of cap {sign}{num(s.cap)}{'' if unit == 'usd' else ' tokens'}"
        )
    return bits


def figures_text(figures: cap.Figures, at: str | None) -> str:
    """A decision's figures; `at`: the decision's time."""
    cases = figures.active_cases
    lines = []
    if figures.max_active_cases is not None:
        lines.append(
            f"cases: {cases.total} active (baseline {cases.baseline}, test "
            f"{cases.test}) of target {figures.target_active_cases}, max "
            f"{figures.max_active_cases}"
        )
    if figures.dimensions:
        lines += readable.decision_dimension_lines(figures)
    elif figures.target_tpm is not None:  # figures recorded before dimensions existed
        lines.append(
            f"tpm: load {num(figures.load_tpm)} (usage {num(figures.usage_tpm)}, "
            f"reserved {figures.reserved_tpm}) + forecast {num(figures.forecast_tpm)} "
            f"vs target {figures.target_tpm}; headroom {num(figures.headroom_tpm)} TPM"
        )
    if figures.target_tpm is not None or figures.dimensions:
        cooldown = cooldown_text(figures.cooldown_until, at)
        lines.append(coverage_text(figures, with_last=True) + ", " + cooldown)
    lines += ["spend: " + bit for bit in spend_bits(figures.spend)]
    lines += pool_lines(figures.pool, at)
    return "\n  ".join(lines) if lines else "no gate configured"


def pool_bits(pool: cap.PoolFigures | UnsetType) -> list[str]:
    """An admission's pool dimensions: `pool org tpm load 500/1000 (own 500 of share 500)`."""
    if isinstance(pool, UnsetType):
        return []
    return [
        f"pool {pool.name} {name} load {num(d.load)}/{d.target} (own {num(d.goal_load)} of "
        f"share {num(d.share)}), forecast {num(d.forecast)}"
        for name, d in pool.dimensions.items()
    ]


def pool_lines(pool: cap.PoolFigures | UnsetType, at: str | None) -> list[str]:
    """A refusal's pool figures, one line a dimension, then the pool's cooldown."""
    if isinstance(pool, UnsetType):
        return []
    lines = [
        f"pool {pool.name} {name}: load {num(d.load)} (own {num(d.goal_load)}, share "
        f"{num(d.share)}, borrowed {num(d.borrowed)}) + forecast {num(d.forecast)} vs target "
        f"{d.target}; others guaranteed {num(d.protected_others)}; headroom {num(d.headroom)}"
        for name, d in pool.dimensions.items()
    ]
    lines.append(f"pool {pool.name}: " + cooldown_text(pool.cooldown_until, at))
    return lines


def dimension_lines(
    dimensions: Mapping[cap.Dimension, cap.DimensionFigures] | Mapping[str, DimensionView],
    binding: str | None,
) -> list[str]:
    """One line per configured dimension (tpm included)."""
    return [
        readable.dimension_line(name, d, binding=name == binding) for name, d in dimensions.items()
    ]
