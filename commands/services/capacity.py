"""Capacity use cases (SPEC §3.5): configure, observe, admit, reject, release, inspect.

Each writer is one transaction: lock -> catch up -> sample time (under the lock,
seed 000) -> decide with the pure functions of `projections.capacity` -> append ->
fdatasync. The results are the JSON objects the CLI prints with `--json`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import msgspec

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.clock import canonical_at, format_us, format_us_or_none, parse_at, wall_us
from quotaledger.journal.store import PendingRecord
from quotaledger.projections import capacity as cap
from quotaledger.projections import limits
from quotaledger.projections import reasons as R
from quotaledger.projections.capacity import ConfigFields
from quotaledger.projections.ledger import LedgerState
from quotaledger.services.base import (
    ServiceBase,
    check_identifier,
    check_text,
    check_tokens,
    conclude,
    event_json,
)
from quotaledger.usecases.capacity import ReleaseAnswer, ReleaseRequest
from quotaledger.usecases.decode import event_or_unset

if TYPE_CHECKING:  # mypy only: 3.11 has no typing.Unpack; answer shapes cost start-up
    from typing_extensions import Unpack

    from quotaledger.adapters.headers import HeaderSource, ProviderHeaders
    from quotaledger.services.answers import (
        ActiveRunJson,
        AdmitAnswer,
        AdmitOutcome,
        ConfigJson,
        ConfigureAnswer,
        ConfigureRefusal,
        DimensionJson,
        GoalInspectJson,
        InspectAnswer,
        ObserveAnswer,
        ProviderDimensionJson,
        ProviderPart,
        RejectAnswer,
    )


def _choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InvalidInput(
            f"{option} must be one of {', '.join(choices)}, got {value!r}",
            code=codes.INVALID_CHOICE,
            option=option,
        )
    return value


def _bounded(option: str, value: float | None, low: int, high: int) -> float | None:
    if value is not None and not low <= value <= high:
        raise InvalidInput(
            f"{option} must be an integer from {low} to {high}, got {value}",
            code=codes.INVALID_OPTION,
            option=option,
        )
    return value


class CapacityService(ServiceBase):
    """Capacity admission over the open journal."""

    # -- configure ---------------------------------------------------------------------

    def configure(
        self,
        *,
        goal: str,
        at: str | None = None,
        remove_limit: Sequence[str] = (),
        remove_gate: Sequence[str] = (),
        **fields: Unpack[ConfigFields],
    ) -> ConfigureAnswer | ConfigureRefusal:
        """Change a goal's capacity config: only the fields given change (SPEC §3.5).

        A derived default never set explicitly (a target from its quota, the case
        target and caps from max_active_cases) follows its source. `remove_limit`
        removes dimensions (tpm, itpm, otpm, rpm), `remove_gate` gates (cases, tokens).
        """
        check_identifier("--goal", goal)
        remove_limit, remove_gate = _names(remove_limit), _names(remove_gate)
        given = cap.given_fields(fields)
        if not given and not remove_limit and not remove_gate:
            raise InvalidInput(
                "nothing to configure: give the case gate (--max-active-cases ...), the token "
                "gate (--quota-tpm, --quota-itpm ...), --remove-limit or --remove-gate",
                code=codes.INVALID_CONFIG,
            )
        # The rule needs the goal's config: an invalid result raises inside the
        # transaction, which then appends nothing.
        with self.journal.transaction() as txn:
            at_text = txn.time_for(goal, at)
            state = cap.goal_of(txn.state.capacity, goal)
            current = cap.Config(state.cases, state.tokens, tuple(state.explicit))
            new = cap.reconfigure(
                current, given, remove_limits=remove_limit, remove_gates=remove_gate
            )
            config = config_json(new.cases, new.tokens)
            changes = cap.changes(current, new)
            active = cap.evaluate(state, parse_at(at_text)).active_cases
            below = cap.config_below_occupancy(active, new.cases)
            if below:
                refusal: ConfigureRefusal = {
                    "ok": False,
                    "goal": goal,
                    "appended": False,
                    "reasons": [R.CONFIG_BELOW_OCCUPANCY],
                    "detail": below,
                    "active_cases": msgspec.to_builtins(active),
                    "config": config,
                    "changes": changes,
                }
                return refusal
            payload = cap.CapacityConfigured(
                cases=new.cases, tokens=new.tokens, explicit=list(new.explicit)
            )
            pending = txn.append(cap.CONFIGURED, goal, payload, at_text)
        answer: ConfigureAnswer = {
            "ok": True,
            "goal": goal,
            "appended": True,
            "config": config,
            "explicit": list(new.explicit),
            "changes": changes,
            "event": event_json(pending),
        }
        return answer

    # -- observe -----------------------------------------------------------------------

    def observe(
        self,
        *,
        goal: str,
        uncached_input: int | None = None,
        cached_input: int | None = None,
        output: int | None = None,
        cache_write_input: int | None = None,
        run: str | None = None,
        requests: int | None = None,
        coverage: str = "measured",
        source: str | None = None,
        usage: str | Mapping[str, Any] | None = None,
        usage_format: str = "auto",
        provider_headers: HeaderSource | None = None,
        provider: Mapping[str, Mapping[str, Any]] | None = None,
        at: str | None = None,
    ) -> ObserveAnswer:
        """Record provider usage (a zero-token measured observation is a heartbeat).

        The counts come from the count arguments (absent ones are 0) or from `usage`:
        the provider's usage object or a whole response body, as JSON text or a dict,
        mapped by `usage_format` (SPEC §3.6; one request). `provider_headers` are the
        response's headers (text, or a mapping such as httpx.Headers): their
        rate-limit report is recorded, resets measured from the event's time.
        `provider` is such a report already resolved:
        `{dimension: {"limit", "remaining", "reset_at"}}`.
        """
        check_identifier("--goal", goal)
        if run is not None:
            check_identifier("--run", run)
        counts = observed_counts(
            usage=usage,
            usage_format=usage_format,
            uncached_input=uncached_input,
            cached_input=cached_input,
            cache_write_input=cache_write_input,
            output=output,
            requests=requests,
        )
        fields: dict[str, Any] = {
            "run": run,
            **counts,
            "coverage": _choice("--coverage", coverage, cap.COVERAGES),
            "source": None if source is None else check_text("--source", source),
        }
        headers = provider_headers_of(provider_headers, provider)
        fixed_report = provider_report(provider)
        with self.journal.transaction() as txn:
            at_text = txn.time_for(goal, at)
            report = fixed_report
            if headers is not None:
                report = provider_report(headers.resolve(parse_at(at_text)).provider)
            payload = cap.CapacityObserved(**fields, provider=report)
            pending = txn.append(cap.OBSERVED, goal, payload, at_text)
        state = cap.goal_of(self.journal.state.capacity, goal)
        # The answer shows the window's usage only: not the whole evaluation (every
        # dimension, the active runs), which costs 3-4x as much.
        window = cap.usage_at(state, parse_at(at_text))
        leased = state.runs.get(run) if run is not None else None
        answer: ObserveAnswer = {
            "ok": True,
            "goal": goal,
            "run": run,
            "appended": True,
            "usage_tpm": window.usage_tpm,
            "usage": msgspec.to_builtins(window.parts),
            "coverage": window.coverage,
            "provider": None if report is None else msgspec.to_builtins(report),
            "lease_until": format_us_or_none(leased.lease_until_us) if leased is not None else None,
            "event": event_json(pending),
        }
        return answer

    # -- admit -------------------------------------------------------------------------

    def admit(
        self,
        *,
        goal: str,
        run: str,
        case: str | None = None,
        arm: str | None = None,
        class_: str = "solver",
        forecast_tpm: int | None = None,
        forecast_itpm: int | None = None,
        forecast_otpm: int | None = None,
        forecast_rpm: int | None = None,
        lease_s: int | None = None,
        at: str | None = None,
        dry_run: bool = False,
    ) -> AdmitAnswer:
        """Decide whether `run` may start now; journal the admission or the refusal."""
        request = admit_request(
            goal=goal,
            run=run,
            case=case,
            arm=arm,
            class_=class_,
            forecast_tpm=forecast_tpm,
            forecast_itpm=forecast_itpm,
            forecast_otpm=forecast_otpm,
            forecast_rpm=forecast_rpm,
            lease_s=lease_s,
        )
        if dry_run and not self.journal.store.writable:
            # A read-only handle polls without the lock: whatever is durable now.
            ledger: LedgerState = self.journal.refresh()
            at_text = self._time_without_lock(goal, at)
            state = cap.goal_of(ledger.capacity, goal)
            decision = cap.decide_admission(state, request, parse_at(at_text))
            return admit_json(goal, decision, None, at_text, dry_run=True)
        with self.journal.transaction() as txn:
            at_text = txn.time_for(goal, at)
            state = cap.goal_of(txn.state.capacity, goal)
            decision = cap.decide_admission(state, request, parse_at(at_text))
            pending = None if dry_run else conclude(txn, goal, at_text, decision)
        return admit_json(goal, decision, pending, at_text, dry_run=dry_run)

    # -- reject ------------------------------------------------------------------------

    def reject(
        self,
        *,
        goal: str,
        run: str | None = None,
        retry_after_s: float | None = None,
        detail: str | None = None,
        provider_headers: HeaderSource | None = None,
        provider: Mapping[str, Mapping[str, Any]] | None = None,
        at: str | None = None,
    ) -> RejectAnswer:
        """Record a provider capacity rejection (HTTP 429) and start the bounded cooldown.

        `retry_after_s` may be fractional; without it, the Retry-After of
        `provider_headers` (seconds, milliseconds or an HTTP-date measured from the
        event's time) is used. `provider_headers` and `provider` as for `observe`.
        """
        check_identifier("--goal", goal)
        if run is not None:
            check_identifier("--run", run)
        retry_after_s = check_retry_after_s(retry_after_s)
        if detail is not None:
            check_text("--detail", detail)
        headers = provider_headers_of(provider_headers, provider)
        report = provider_report(provider)
        with self.journal.transaction() as txn:
            at_text = txn.time_for(goal, at)
            at_us = parse_at(at_text)
            if headers is not None:
                resolved = headers.resolve(at_us)
                report = provider_report(resolved.provider)
                if retry_after_s is None:
                    retry_after_s = resolved.retry_after_s
            state = cap.goal_of(txn.state.capacity, goal)
            plan = cap.plan_rejection(state, at_us, retry_after_s)
            payload = cap.CapacityRejected(
                run=run,
                retry_after_s=plan.retry_after_s,
                cooldown_s=plan.cooldown_s,
                clamped=plan.clamped,
                cooldown_until=format_us(plan.cooldown_until_us),
                streak=plan.streak,
                detail=detail,
                provider=report,
            )
            pending = txn.append(cap.REJECTED, goal, payload, at_text)
        # The payload's fields in its order; `provider` only when reported, as it is
        # recorded (omit_defaults).
        provider_part: ProviderPart = {}
        if payload.provider is not None:
            provider_part["provider"] = msgspec.to_builtins(payload.provider)
        answer: RejectAnswer = {
            "ok": True,
            "goal": goal,
            "appended": True,
            "run": payload.run,
            "retry_after_s": payload.retry_after_s,
            "cooldown_s": payload.cooldown_s,
            "clamped": payload.clamped,
            "cooldown_until": payload.cooldown_until,
            "streak": payload.streak,
            "detail": payload.detail,
            **provider_part,
            "event": event_json(pending),
        }
        return answer

    # -- release -----------------------------------------------------------------------

    def release(self, request: ReleaseRequest) -> ReleaseAnswer:
        """Release an active run's case slot and token reservation."""
        goal, run = request.goal, request.run
        with self.journal.transaction() as txn:
            at_text = txn.time_for(goal, request.at)
            state = cap.goal_of(txn.state.capacity, goal)
            decision = cap.decide_release(state, run, parse_at(at_text))
            pending = conclude(txn, goal, at_text, decision)
        # Releasing a run that is not active is ok: it holds nothing (SPEC §3.4).
        return ReleaseAnswer(
            ok=True,
            goal=goal,
            run=run,
            released=pending is not None,
            appended=pending is not None,
            reasons=list(decision.reasons),
            event=event_or_unset(pending),
        )

    # -- inspect -----------------------------------------------------------------------

    def inspect(
        self, *, goal: str | None = None, at: str | None = None, seq: int | None = None
    ) -> InspectAnswer:
        """Every goal (or one) as of now, as of time `at`, or as of record `seq`.

        Now means the implicit time a writer would use (wall clock, never before the
        goal's last event); with `seq`, each goal is shown as of its last event up to
        that record.
        """
        if goal is not None:
            self.require_goal(goal)
        if at is None and seq is None:
            self.journal.refresh()  # a long-lived handle shows what others appended since
        ledger: LedgerState = self._state_as_of(at=at, seq=seq)
        goals = ledger.capacity.goals
        names = sorted(goals) if goal is None else [goal]
        now_us = wall_us()
        result: dict[str, GoalInspectJson] = {}
        for name in names:
            state = cap.goal_of(ledger.capacity, name)
            if at is not None:
                at_us = parse_at(canonical_at(at))
            elif seq is not None:
                at_us = state.last_at_us
            else:
                at_us = max(now_us, state.last_at_us)
            result[name] = inspect_goal(state, at_us)
        answer: InspectAnswer = {"ok": True, "goals": result}
        return answer


# -- building requests and results -----------------------------------------------------


def admit_request(
    *,
    goal: str,
    run: str,
    case: str | None,
    arm: str | None,
    class_: str,
    forecast_tpm: int | None,
    lease_s: int | None,
    forecast_itpm: int | None = None,
    forecast_otpm: int | None = None,
    forecast_rpm: int | None = None,
) -> cap.AdmitRequest:
    """A checked admission request (exit 2 on bad input, before anything is locked)."""
    check_identifier("--goal", goal)
    check_identifier("--run", run)
    if case is not None:
        check_identifier("--case", case)
    if arm is not None:
        _choice("--arm", arm, cap.ARMS)
    _choice("--class", class_, cap.RUN_CLASSES)
    forecasts = {
        "tpm": forecast_tpm,
        "itpm": forecast_itpm,
        "otpm": forecast_otpm,
        "rpm": forecast_rpm,
    }
    for dimension, forecast in forecasts.items():
        if forecast is not None:
            check_tokens(f"--forecast-{dimension}", forecast)
    _bounded("--lease-s", lease_s, 1, limits.LEASE_S_MAX)
    return cap.AdmitRequest(
        run=run,
        case=case,
        arm=arm,  # type: ignore[arg-type]
        run_class=class_,  # type: ignore[arg-type]
        forecast_tpm=forecast_tpm,
        lease_s=lease_s,
        forecast_itpm=forecast_itpm,
        forecast_otpm=forecast_otpm,
        forecast_rpm=forecast_rpm,
    )


def provider_report(
    provider: Mapping[str, Mapping[str, Any]] | None,
) -> cap.ProviderReport | None:
    """A checked provider report, its dimensions in the documented order (exit 2 if bad)."""
    if provider is None:
        return None
    try:
        report = msgspec.convert(provider, cap.ProviderReport)
    except (msgspec.ValidationError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"provider: not a report of {{dimension: {{limit, remaining, reset_at}}}} ({exc})",
            code=codes.INVALID_PROVIDER_REPORT,
            option="provider",
        ) from None
    return {d: report[d] for d in cap.DIMENSIONS if d in report} or None


COUNT_OPTIONS = {
    "uncached_input": "--uncached-input",
    "cached_input": "--cached-input",
    "cache_write_input": "--cache-write-input",
    "output": "--output",
    "requests": "--requests",
}
"""The count arguments of `observe`, which `--usage` replaces."""


def observed_counts(
    *,
    usage: str | Mapping[str, Any] | None,
    usage_format: str,
    **counts: int | None,
) -> dict[str, int | None]:
    """An observation's checked counters: from a provider's usage body, or from the
    count arguments (absent ones 0; `requests` stays null, SPEC §3.6), never both."""
    if usage is None and usage_format == "auto":
        return _given_counts(counts)  # a runner's every call: nothing to look up
    # The provider formats load only when used: `admit` and a plain `observe` (a
    # runner's every call) never pay for them.
    from quotaledger.adapters.usage import check_format, parse_usage, plain, usage_of

    check_format(usage_format)
    if usage is None:
        return _given_counts(counts)
    given = [COUNT_OPTIONS[name] for name, value in counts.items() if value is not None]
    if given:
        raise InvalidInput(
            f"--usage gives the counts: leave out {', '.join(given)}",
            code=codes.USAGE,
            option="--usage",
        )
    mapped = (
        parse_usage(usage, usage_format)
        if isinstance(usage, str)
        else usage_of(plain(usage), usage_format)
    )
    return cast("dict[str, int | None]", mapped)


def _given_counts(counts: dict[str, int | None]) -> dict[str, int | None]:
    """The count arguments checked, in their order: an absent one is 0, except
    `requests`, which stays null (SPEC §3.6)."""
    checked: dict[str, int | None] = {}
    for name, value in counts.items():
        if value is None:
            checked[name] = None if name == "requests" else 0
        elif 0 <= value <= limits.TOKEN_COUNT_MAX:
            checked[name] = value
        else:
            checked[name] = check_tokens(COUNT_OPTIONS[name], value)  # raises
    return checked


def provider_headers_of(
    source: HeaderSource | None, provider: Mapping[str, Any] | None
) -> ProviderHeaders | None:
    """The recognised, checked headers of `--provider-headers` (exit 2 before the
    journal is touched), or None when none were given."""
    if source is None:
        return None
    from quotaledger.adapters.headers import parse_provider_headers

    if provider is not None:
        raise InvalidInput(
            "give provider_headers or a resolved provider report, not both",
            code=codes.INVALID_OPTION,
            option="--provider-headers",
        )
    if not isinstance(source, str | Mapping | list | tuple):
        raise InvalidInput(
            "--provider-headers must be header text or a mapping of names to values, got "
            + type(source).__name__,
            code=codes.INVALID_PROVIDER_HEADERS,
            option="--provider-headers",
        )
    headers = parse_provider_headers(source)
    return None if headers.empty else headers


def check_retry_after_s(value: float | None) -> float | None:
    """A Retry-After in seconds, fractional or whole (an integer stays one)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(
            f"--retry-after-s must be a number of seconds, got {value!r}",
            code=codes.INVALID_OPTION,
            option="--retry-after-s",
        )
    if not 0 <= value <= limits.RETRY_AFTER_S_MAX:  # NaN fails this too
        raise InvalidInput(
            f"--retry-after-s must be from 0 to {limits.RETRY_AFTER_S_MAX} seconds, got {value}",
            code=codes.INVALID_OPTION,
            option="--retry-after-s",
        )
    if isinstance(value, float) and value.is_integer():
        return int(value)  # 30.0 is recorded as 30, as a whole-second Retry-After always was
    return value


def admit_json(
    goal: str,
    decision: cap.AdmissionDecision,
    pending: PendingRecord | None,
    at_text: str,
    *,
    dry_run: bool,
) -> AdmitAnswer:
    """The `admit` result (SPEC §8): receipt on admission, reasons and figures on refusal."""
    detail = decision.detail
    outcome: AdmitOutcome
    if decision.ok:
        assert detail.receipt is not None
        # The receipt names its admission event: the original one on a replay, none on a
        # dry run. (It is added here because a record cannot contain its own hash.)
        seq = hash_ = None
        if decision.idempotent and detail.original is not None:
            seq, hash_ = detail.original.seq, detail.original.hash
        elif pending is not None:
            seq, hash_ = pending.record.seq, pending.record.hash
        outcome = {"receipt": {**msgspec.to_builtins(detail.receipt), "seq": seq, "hash": hash_}}
    else:
        outcome = {
            "reasons": list(decision.reasons),
            "figures": msgspec.to_builtins(detail.figures),
            "binding_dimension": detail.figures.binding_dimension,
        }
    answer: AdmitAnswer = {
        "ok": decision.ok,
        "goal": goal,
        "at": at_text,
        "admitted": decision.ok,
        "idempotent": decision.idempotent,
        "appended": pending is not None,
        "dry_run": dry_run,
        **outcome,
        "event": event_json(pending) if pending is not None else None,
    }
    return answer


def config_json(cases: cap.CaseConfig | None, tokens: cap.TokenConfig | None) -> ConfigJson:
    """The config as answers show it: `limits` always present (events omit it when empty)."""
    tokens_json = None if tokens is None else {**msgspec.to_builtins(tokens), "limits": {}}
    if tokens_json is not None and tokens is not None:
        tokens_json["limits"] = msgspec.to_builtins(tokens.limits)
    config: ConfigJson = {"cases": msgspec.to_builtins(cases), "tokens": tokens_json}
    return config


def inspect_goal(state: cap.GoalCapacity, at_us: int) -> GoalInspectJson:
    """One goal as of `at_us`, in the shape of SPEC §8's `inspect`."""
    ev = cap.evaluate(state, at_us)
    goal: GoalInspectJson = {
        "at": format_us(at_us),
        "config": config_json(ev.cases, ev.tokens),
        "usage_tpm": ev.usage.usage_tpm,
        "usage": msgspec.to_builtins(ev.usage.parts),
        "reserved_tpm": ev.reserved_tpm,
        "load_tpm": ev.load_tpm,
        "headroom_tpm": {
            "solver": ev.headroom_tpm("solver"),
            "evaluator": ev.headroom_tpm("evaluator"),
        },
        "coverage": ev.usage.coverage,
        "observation_stale": ev.observation_stale,
        "last_observation_at": format_us_or_none(ev.last_observation_at_us),
        "cooldown_until": format_us_or_none(ev.cooldown_until_us),
        "cooldown_active": ev.cooldown_active,
        "active_runs": [_active_run_json(r) for r in ev.active_runs],
        "active_counts": msgspec.to_builtins(ev.active_cases),
        "dimensions": dimensions_json(ev),
        "provider": provider_json(ev),
        "admission_ready": cap.admission_ready(ev),
        "next_action": cap.next_action(ev),
        "totals": {
            "admissions": state.admissions_total,
            "refusals": state.refusal_events_total,
            "refusals_by_reason": dict(sorted(state.refusals_total.items())),
            "rejections": state.rejections_total,
            "releases": state.releases_total,
        },
    }
    return goal


def dimensions_json(ev: cap.Evaluation) -> dict[str, DimensionJson]:
    """Every configured dimension as of the evaluation (SPEC §3.6, inspect's shape)."""
    return {
        dimension: {
            "usage": state.usage,
            "reserved": state.reserved,
            "provider_used": state.provider_used,
            "load": state.load,
            "quota": None if state.limit is None else state.limit.quota,
            "target": None if state.limit is None else state.limit.target,
            "headroom": {
                "solver": state.headroom("solver"),
                "evaluator": state.headroom("evaluator"),
            },
        }
        for dimension, state in ev.dimensions.items()
    }


def provider_json(ev: cap.Evaluation) -> dict[str, ProviderDimensionJson]:
    """The latest provider report of every dimension reported (SPEC §3.6)."""
    found: dict[str, ProviderDimensionJson] = {}
    for dimension, state in ev.every_dimension.items():
        view = state.provider
        if view is None:
            continue
        report = view.report
        found[dimension] = {
            "limit": report.limit,
            "remaining": report.remaining,
            "reset_at": format_us_or_none(report.reset_at_us),
            "reported_at": format_us(report.at_us),
            "live": view.live,
            "used": view.used,
            "used_since": view.used_since,
            "headroom": view.room,
            "config_above_provider_limit": (
                state.limit is not None
                and report.limit is not None
                and state.limit.quota > report.limit
            ),
        }
    return found


def _active_run_json(run: cap.ActiveRun) -> ActiveRunJson:
    request = run.request
    active: ActiveRunJson = {
        "run": request.run,
        "case": request.case,
        "arm": request.arm,
        "class": request.run_class,
        "forecast_tpm": cap.forecast_of(request, "tpm"),
        "forecasts": {d: cap.forecast_of(request, d) for d in cap.DIMENSIONS},
        "admitted_at": format_us(run.admitted_at_us),
        "lease_until": format_us_or_none(run.lease_until_us),
        "seq": run.seq,
    }
    return active


def _names(values: Sequence[str] | str) -> tuple[str, ...]:
    """A list option given as one name or several."""
    return (values,) if isinstance(values, str) else tuple(values)
