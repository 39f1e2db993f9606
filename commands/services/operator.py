"""Operators' use cases (SPEC §7, §13.2): goals, audit, whatif, report, metrics,
validity.

All six are readers: they take no lock and never write to the journal (`report`
and `metrics --out` write only their own file). The decisions are re-taken by
`projections.audit` with the same pure function `admit` uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from quotaledger.journal import Head, InvalidInput, Record, codes
from quotaledger.journal.clock import (
    US_PER_S,
    canonical_at,
    format_us,
    format_us_or_none,
    parse_at,
    wall_us,
)
from quotaledger.projections import audit as au
from quotaledger.projections import capacity as cap
from quotaledger.projections.audit.pool_timeline import PoolTimeline
from quotaledger.projections.capacity.fold import QUEUE_WAIT_BUCKETS_S
from quotaledger.projections.ledger import LedgerState, pool_context_of
from quotaledger.render.prometheus import prometheus_text
from quotaledger.services.audit_queue import is_queue_decision, queue_explanation
from quotaledger.services.audit_views import (
    explanation_of,
    flip_of,
    promotion_flip_of,
    recorded_event_of,
)
from quotaledger.services.base import ServiceBase, seq_out_of_range
from quotaledger.services.clocks import clock_ahead_of
from quotaledger.services.journal import names_run, unknown_run
from quotaledger.services.metric_families import metric_families
from quotaledger.services.outfile import write_atomically
from quotaledger.services.pool_metrics import pool_metrics
from quotaledger.services.pool_whatif import pool_whatif
from quotaledger.services.pools import require_pool
from quotaledger.services.queueing import held_in_queue, queue_view
from quotaledger.services.settlement import decision_view
from quotaledger.usecases.decode import API
from quotaledger.usecases.operator import (
    AuditAnswer,
    AuditEvent,
    AuditRequest,
    Explanation,
    Gates,
    GoalsAnswer,
    GoalsRequest,
    GoalSummary,
    MetricFamily,
    MetricSample,
    MetricsAnswer,
    MetricsRequest,
    Number,
    Outcome,
    Range,
    ReportAnswer,
    ReportRequest,
    RunHost,
    RunTokens,
    ValidityAnswer,
    ValidityRequest,
    ValidityRun,
    WhatifAnswer,
    WhatifRequest,
    range_us,
)

Progress = Callable[[int], None]

NOT_REPRODUCED = "not_reproduced"


def _ignore(record: Record, payload: Any, line: bytes) -> None:
    pass


def _feeder(fold: au.WhatIf) -> Callable[[Record, Any, bytes], None]:
    feed = fold.feed

    def visit(record: Record, payload: Any, line: bytes) -> None:
        feed(record, payload)

    return visit


def _no_decision(request: AuditRequest, head_seq: int) -> InvalidInput:
    if request.seq is not None and request.seq > head_seq:
        # One code per condition (SPEC §8): a seq past the head, as inspect --seq says.
        return seq_out_of_range(request.seq, head_seq)
    what = (
        f"seq {request.seq}"
        if request.seq is not None
        else f"hash {request.hash}"
        if request.hash is not None
        else f"capacity decision for goal {request.goal!r} run {request.run!r}"
    )
    return InvalidInput(f"the journal holds no {what}", code=codes.DECISION_NOT_FOUND)


def _check_selector(request: AuditRequest) -> None:
    if not request.one_selector():
        raise InvalidInput(
            lambda names: (
                f"give exactly one of {names('seq')} N, {names('hash')} H, or "
                f"{names('goal')} G {names('run')} R"
            ),
            code=codes.INVALID_OPTION,
            about=("seq", "hash", "goal", "run"),
        )


def _before_range(goal: str, since_us: int | None) -> Callable[[Head], bool]:
    """Whether a checkpoint holds nothing of `goal` at or after `since_us` (all of it,
    without a `since_us`): then the report may start there (SPEC §9: `--since` skips
    the work before it), its timeline taking the goal up from the checkpoint's state."""

    def before(covered: Head) -> bool:
        last_at = covered.goal_last_at.get(goal)
        return last_at is None or (since_us is not None and parse_at(last_at) < since_us)

    return before


def _decision_matcher(request: AuditRequest) -> Callable[[Record], bool]:
    """Whether a record is the one `seq` or `hash` names."""
    seq, hash = request.seq, request.hash
    if seq is not None:
        return lambda record: record.seq == seq
    return lambda record: record.hash == hash


class OperatorService(ServiceBase):
    """Audit, counterfactual replay, report and metrics over the open journal."""

    # -- audit -------------------------------------------------------------------------

    def audit(self, request: AuditRequest) -> AuditAnswer:
        """Re-take a journaled decision on the state just before it and explain it.

        `ok` (and `reproduced`) is false when the replay differs from the record: the
        code's rules changed or the log was edited.
        """

        # From genesis, never from a checkpoint (SPEC §2.5): a decision made on a forged
        # or stale checkpoint must show as not reproduced.
        if not self.journal.folded and (request.seq is not None or request.hash is not None):
            # One pass: the handle's own fold from genesis, its state copied just
            # before the decision is folded.
            record, payload, before = self._decision_in_replay(request)
        else:
            record, payload = self._find_decision(request)
            before = self.journal.fold_as_of(seq=record.seq - 1, use_checkpoint=False)[0]
        if record.kind in cap.DECISION_KINDS:
            recorded = au.recorded_decision(record, payload)
            assert recorded is not None

            goal_state = cap.goal_of(before.capacity, recorded.goal)
            pool = pool_context_of(before, recorded.goal)
            result = au.audit_decision(goal_state, recorded, pool)
            explanation = explanation_of(
                goal_state, recorded.request, recorded.at_us, result.replayed, pool, recorded.goal
            )
            if not is_queue_decision(record, payload):
                return capacity_audit(result, explanation)
            explanation.queue = queue_explanation(self.journal, record, payload)
            answer = capacity_audit(result, explanation)
            if not all(d.reproduced for d in explanation.queue.decisions):
                answer.ok = False  # the entry's other decision is not reproduced
                answer.reasons = [NOT_REPRODUCED]
            return answer
        return settlement_audit(au.audit_settlement(before.settlement, record, payload))

    def _first_decision(self, request: AuditRequest) -> tuple[Record, Any]:
        """The record `seq` or `hash` names, or the goal's last capacity decision of run."""
        seq, hash, goal, run = request.seq, request.hash, request.goal, request.run
        found: tuple[Record, Any] | None = None
        run_seen = False
        for record, payload, _line in self.journal.records(
            after_seq=-1 if seq is None else seq - 1
        ):
            if seq is not None or (hash is not None and record.hash == hash):
                return record, payload
            if hash is not None or run is None or record.goal != goal:
                continue
            if record.kind in cap.DECISION_KINDS and payload.request.run == run:
                found = (record, payload)
            run_seen = run_seen or names_run(payload, run)
        if seq is not None:  # no record at seq: past the head (SPEC §8: one code)
            raise seq_out_of_range(seq, self.journal.head.seq)
        if found is None and hash is None and not run_seen:
            raise unknown_run(run, goal)
        if found is None:
            raise _no_decision(request, self.journal.head.seq)
        return found

    def _decision_in_replay(self, request: AuditRequest) -> tuple[Record, Any, LedgerState]:
        """The record `seq` or `hash` names and the state just before it, from the fold
        of a handle opened with fold=False (the selector checked after the pass, so its
        errors come after a corrupt journal's, as when the open folded first)."""
        matches = _decision_matcher(request)
        journal = self.journal
        found: list[tuple[Record, Any, bytes]] = []

        def visit(record: Record, payload: Any, line: bytes) -> None:
            if not found and matches(record):
                found.append((record, payload, journal.projector.dump(journal.state)))

        journal.replay(visit, use_checkpoint=False)
        _check_selector(request)
        if not found and request.seq is not None:
            raise seq_out_of_range(request.seq, self.journal.head.seq)
        if not found:
            raise _no_decision(request, self.journal.head.seq)
        record, payload, before = found[0]
        self._auditable(record)
        return record, payload, journal.projector.load(before)

    def _find_decision(self, request: AuditRequest) -> tuple[Record, Any]:
        if not self.journal.folded:
            self.journal.replay(_ignore)  # a handle opened with fold=False: fold it first
        _check_selector(request)
        if request.goal is not None:
            self.require_goal(request.goal)
        found = self._first_decision(request)
        self._auditable(found[0])
        return found

    def _auditable(self, record: Record) -> None:
        """Nothing, if `record` is a decision audit re-takes; else exit 2 saying why."""

        if record.kind in cap.DECISION_KINDS or record.kind in au.SETTLEMENT_DECISION_KINDS:
            return
        if record.kind in au.HOST_DECISION_KINDS:
            raise InvalidInput(
                f"record {record.seq} ({record.kind}) is a host decision whose inputs (handoff "
                "file, --cursor, --max-attempts, --max-phase) are not all journaled: it cannot "
                "be re-decided from the journal; see `quotaledger host status`",
                code=codes.NOT_AUDITABLE_BY_REPLAY,
                seq=record.seq,
                kind=record.kind,
            )
        raise InvalidInput(
            f"record {record.seq} ({record.kind}) is not a decision; audit takes "
            "capacity.admitted / capacity.refused (and turn/budget decisions)",
            code=codes.NOT_A_DECISION,
            seq=record.seq,
            kind=record.kind,
        )

    # -- goals -------------------------------------------------------------------------

    def goals(self, request: GoalsRequest) -> GoalsAnswer:
        """Every goal with an event: its domains, gates and dimensions, active runs, last
        event time, admission_ready and next_action (as `inspect` computes them), now
        or as of `at`."""
        at = request.at
        at_us = None if at is None else parse_at(canonical_at(at))
        if not self.journal.folded:
            self.journal.replay(_ignore)  # a handle opened with fold=False: fold it first
        elif at is None:
            self.journal.refresh()
        ledger: LedgerState = self.journal.state if at is None else self._state_as_of(at=at)
        last_at = self.journal.head.goal_last_at
        now_us = wall_us()
        ahead = clock_ahead_of(self.journal, now_us)
        goals: dict[str, GoalSummary] = {}
        for name in self.known_goals():
            state = cap.goal_of(ledger.capacity, name)
            goal_at_us = at_us if at_us is not None else max(now_us, state.last_at_us)
            ev = cap.evaluate(state, goal_at_us)
            domains = _domains(ledger, name)
            held = bool(state.queue) and held_in_queue(queue_view(ledger, name), name, goal_at_us)
            pool_reasons = cap.ready_pool_reasons(
                state, goal_at_us, pool_context_of(ledger, name), name
            )
            next_action: str | None = cap.next_action(
                ev, clock_ahead=ahead(name), held_in_queue=held, pool_reasons=pool_reasons
            )
            if "capacity" not in domains and next_action == "configure":
                # Host or settlement work alone waits for no capacity configuration:
                # no capacity action to take (a clock ahead still is one).
                next_action = None
            goals[name] = GoalSummary(
                domains=domains,
                gates=Gates(cases=ev.cases is not None, tokens=ev.tokens is not None),
                dimensions=_dimensions(ev.tokens),
                active_runs=ev.active_cases.total,
                last_event_at=last_at[name],
                admission_ready=cap.admission_ready(ev, pool_reasons),
                clock_ahead=ahead(name),
                next_action=next_action,
            )
        return GoalsAnswer(ok=True, at=format_us_or_none(at_us), goals=goals)

    # -- whatif ------------------------------------------------------------------------

    def whatif(self, request: WhatifRequest, progress: Progress | None = None) -> WhatifAnswer:
        """Replay the goal's recorded admission requests under a changed config."""

        if request.pool is not None:
            return pool_whatif(self.journal, request, request.pool, progress)
        # A handle opened with fold=False learns its goals from the pass that feeds the
        # replay: the goal is checked after it (an invalid what-if config raises in it).
        goal = request.goal
        if goal is None:  # after the journal was read: its errors come first
            self.journal.replay(lambda record, payload, line: None, progress=progress)
            raise InvalidInput(
                lambda name: f"give {name('goal')} or {name('pool')}: whose decisions to replay",
                code=codes.INVALID_OPTION,
                about=("goal", "pool"),
            )
        if self.journal.folded:
            self.require_goal(goal)
        since_us, until_us = range_us(request.since, request.until, API)
        caps = {"cap_tokens": request.cap_tokens, "cap_usd": request.cap_usd}
        overrides = au.Overrides.of(request.config_fields(), caps, request.price_override())
        replay = au.WhatIf(goal, overrides, since_us=since_us, until_us=until_us)
        self.journal.replay(_feeder(replay), progress=progress)
        self.require_goal(goal)
        return WhatifAnswer(
            ok=True,
            goal=goal,
            assumptions=replay.assumptions(),
            decisions=replay.decisions,
            flips=[flip_of(flip) for flip in replay.flips],
            changes=overrides.changes(),
            range=Range(replay.first_at, replay.last_at),
            promotions=[promotion_flip_of(f) for f in replay.promotion_flips()],
        )

    # -- report ------------------------------------------------------------------------

    def report(self, request: ReportRequest, progress: Progress | None = None) -> ReportAnswer:
        """Write the goal's (or the pool's) self-contained offline HTML report to `out`."""
        timeline: au.Timeline | PoolTimeline
        if request.pool is not None:
            data, timeline = self.pool_report_page(
                request.pool, request.since, request.until, progress
            )
        else:
            assert request.goal is not None  # the request's check: one of the two
            data, timeline = self.report_page(request.goal, request.since, request.until, progress)
        write_atomically("out", request.out, data)
        refusals = sum(1 for d in timeline.decisions if not d.admitted)
        answer = ReportAnswer(
            ok=True,
            goal=request.goal,
            out=request.out,
            bytes=len(data),
            points=len(timeline.points),
            decisions=len(timeline.decisions),
            admissions=len(timeline.decisions) - refusals,
            refusals=refusals,
            rejections=timeline.rejections,
        )
        if request.pool is not None:
            answer.pool = request.pool
        return answer

    def pool_report_page(
        self,
        pool: str,
        since: str | None = None,
        until: str | None = None,
        progress: Progress | None = None,
    ) -> tuple[bytes, PoolTimeline]:
        """The pool's report page (SPEC §12.1: each dimension's load stacked by goal
        against the target) and the timeline it draws: one pass from genesis."""
        from quotaledger.report.html import render_pool_report

        journal = self.journal
        if journal.folded:
            require_pool(journal.state, pool)  # before anything is written
        since_us, until_us = range_us(since, until, API)
        timeline = PoolTimeline(pool, since_us, until_us)
        last: Record | None = None

        def visit(record: Record, payload: Any, line: bytes) -> None:
            nonlocal last
            timeline.feed(record, payload)
            last = record

        journal.replay(visit, progress=progress)
        require_pool(journal.state, pool)
        timeline.finish()
        head_seq, head_hash = (-1, "") if last is None else (last.seq, last.hash)
        page = render_pool_report(
            timeline,
            journal_id=journal.head.journal_id,
            head_seq=head_seq,
            head_hash=head_hash,
            generated_at=format_us(wall_us()),
            journal_target=getattr(journal.store, "url", journal.store.target),
        )
        return page.encode(), timeline

    def report_page(
        self,
        goal: str,
        since: str | None = None,
        until: str | None = None,
        progress: Progress | None = None,
    ) -> tuple[bytes, au.Timeline]:
        """The goal's report page (what `report` writes, what the server's /report
        answers) and the timeline it draws."""
        journal = self.journal
        # A handle opened with fold=False folds in the pass (as in whatif, it learns its
        # goals from it) and the timeline reads that fold's state instead of folding the
        # goal again; a folded handle reads the records again, and the timeline folds.
        riding = not journal.folded
        if not riding:
            self.require_goal(goal)  # before anything is written: no empty page for a typo
        since_us, until_us = range_us(since, until, API)
        timeline = au.Timeline(
            goal,
            since_us=since_us,
            until_us=until_us,
            folded=(lambda: journal.state.capacity) if riding else None,
        )
        validity = au.Validity(goal)
        last: Record | None = None
        first_seq: int | None = None

        def visit(record: Record, payload: Any, line: bytes) -> None:
            nonlocal last, first_seq
            timeline.feed(record, payload)
            validity.feed(record, payload)
            if first_seq is None:
                first_seq = record.seq
            last = record

        journal.replay(visit, progress=progress, resume=_before_range(goal, since_us))
        self.require_goal(goal)
        timeline.finish()
        if first_seq == 0:
            runs = self._validity_answer(validity, since_us, until_us)
        else:
            # The pass started at a checkpoint: a run's first events may lie before it,
            # and a run's row needs its whole history (one more pass, from genesis).
            runs = self.validity(ValidityRequest(goal=goal, since=since, until=until))
        return self._report_page(timeline, last, runs).encode(), timeline

    def _report_page(self, timeline: au.Timeline, last: Record | None, runs: ValidityAnswer) -> str:
        """The report's HTML, its head the last record read (or the checkpoint's)."""
        from quotaledger.report.html import render_report

        journal = self.journal
        head_seq, head_hash = (-1, "") if last is None else (last.seq, last.hash)
        if last is None and journal.checkpoint_seq >= 0:
            head_seq, head_hash = journal.head.seq, journal.head.prev_hash  # nothing after it
        return render_report(
            timeline,
            journal_id=journal.head.journal_id,
            head_seq=head_seq,
            head_hash=head_hash,
            generated_at=format_us(wall_us()),
            journal_target=getattr(journal.store, "url", journal.store.target),
            validity=runs,
        )

    # -- validity ----------------------------------------------------------------------

    def validity(
        self, request: ValidityRequest, progress: Progress | None = None
    ) -> ValidityAnswer:
        """One row per run of the goal, and which of their results quota touched."""
        goal = request.goal
        if self.journal.folded:
            self.require_goal(goal)
        since_us, until_us = range_us(request.since, request.until, API)
        validity = au.Validity(goal)
        feed = validity.feed
        # Every record from genesis: a run's history starts with its first event,
        # whenever that was; the host lanes are read from the fold the pass ends with.
        self.journal.replay(lambda record, payload, line: feed(record, payload), progress=progress)
        self.require_goal(goal)
        return self._validity_answer(validity, since_us, until_us)

    def _validity_answer(
        self, validity: au.Validity, since_us: int | None, until_us: int | None
    ) -> ValidityAnswer:
        """The rows of a goal's runs fed from genesis, as of now, the lanes read from the
        handle's fold."""
        goal = validity.goal
        last_at = self.journal.head.goal_last_at.get(goal)
        now_us = max(wall_us(), 0 if last_at is None else parse_at(last_at))
        hosts = self.journal.state.hosts.goals.get(goal)
        rows = [_validity_run(row) for row in validity.rows(hosts, now_us, since_us, until_us)]
        counts = dict.fromkeys(au.VERDICTS, 0)
        for row in rows:
            counts[row.verdict] += 1
        return ValidityAnswer(ok=True, goal=goal, counts=counts, runs=rows)

    # -- metrics -----------------------------------------------------------------------

    def metrics(self, request: MetricsRequest) -> MetricsAnswer:
        """The current state (or the state as of `at`) as Prometheus metrics; with
        `out`, also written there in the text format, atomically (SPEC §7: a
        node-exporter textfile collector never reads half a file)."""
        goal, at, out = request.goal, request.at, request.out
        if goal is not None:
            self.require_goal(goal)
        if at is None:
            self.journal.refresh()
            ledger: LedgerState = self.journal.state
        else:
            ledger = self._state_as_of(at=at)
        at_us = None if at is None else parse_at(canonical_at(at))
        names = sorted(ledger.capacity.goals) if goal is None else [goal]
        now_us = wall_us()
        families = metric_families()
        queues: dict[str, tuple[list[cap.GoalCapacity], int]] = {}
        for name in names:
            state = cap.goal_of(ledger.capacity, name)
            goal_at_us = at_us if at_us is not None else max(now_us, state.last_at_us)
            _goal_metrics(families, name, state, goal_at_us, pool_context_of(ledger, name))
            if name in queues or not (state.queue or state.queue_waits):
                continue
            view = queue_view(ledger, name)  # a pooled goal's queue is its pool's
            members = list(view.goals.values())
            queue_at_us = (
                goal_at_us if at_us is not None else max(now_us, *(m.last_at_us for m in members))
            )
            queues.setdefault(view.key, (members, queue_at_us))
        for key, (members, queue_at_us) in sorted(queues.items()):
            _queue_metrics(families, key, members, queue_at_us)
        # SPEC §12.1's families: every pool, on its own clock; a pooled goal's pool.
        if goal is None:
            pool_metrics(families, ledger, at_us, now_us)
        elif (pool := pool_context_of(ledger, goal)) is not None:
            pool_metrics(families, ledger, at_us, now_us, only=pool.name)
        families["quotaledger_journal_head_seq"].samples.append(
            MetricSample({}, self.journal.head.seq)
        )
        answer = MetricsAnswer(ok=True, at=format_us_or_none(at_us), goals=names, metrics=families)
        if out is not None:
            data = prometheus_text(answer).encode()
            write_atomically("out", out, data)
            answer.out = out
            answer.bytes = len(data)
        return answer


# -- answers' parts ----------------------------------------------------------------------


def _validity_run(row: au.ValidityRow) -> ValidityRun:
    history, host = row.history, row.host
    queued_us, admitted_us = history.queued_at_us, history.admitted_at_us
    waited_s: Number | None = None
    if admitted_us is not None:
        waited_us = 0 if queued_us is None else admitted_us - queued_us
        whole_s, rest_us = divmod(waited_us, US_PER_S)
        waited_s = whole_s if rest_us == 0 else waited_us / US_PER_S
    uncached, cached, cache_write, output = history.tokens
    return ValidityRun(
        run=history.run,
        case=history.case,
        arm=history.arm,
        queued_at=format_us_or_none(queued_us),
        admitted_at=format_us_or_none(admitted_us),
        released_at=format_us_or_none(history.released_at_us),
        waited_s=waited_s,
        tokens=RunTokens(
            uncached_input=uncached,
            cached_input=cached,
            cache_write_input=cache_write,
            output=output,
        ),
        rejections=history.rejections,
        host=None
        if host is None
        else RunHost(
            lane=host.lane,
            attempts=host.attempts,
            last_outcome=host.last_outcome,
            last_failure=host.last_failure,
            quota_failures=host.quota_failures,
            continued=host.continued,
        ),
        verdict=row.verdict,
    )


def _domains(ledger: LedgerState, goal: str) -> list[str]:
    """The domains whose events name `goal`, in the ledger's order."""
    held = {
        "capacity": goal in ledger.capacity.goals,
        "host": goal in ledger.hosts.goals,
        "settlement": goal in ledger.settlement.goals,
        "probe": goal in ledger.probes.count,
    }
    return [name for name, present in held.items() if present]


def _dimensions(tokens: cap.TokenConfig | None) -> list[str]:
    """The token gate's configured dimensions: tpm when it has a TPM quota, then every
    other dimension it limits (SPEC §3.6)."""
    if tokens is None:
        return []
    combined = ["tpm"] if tokens.quota_tpm is not None else []
    return combined + sorted(tokens.limits)


def capacity_audit(result: au.Audit, explanation: Explanation) -> AuditAnswer:

    recorded, replayed = result.recorded, result.replayed
    return AuditAnswer(
        ok=result.reproduced,
        event=recorded_event_of(recorded),
        recorded=Outcome(recorded.admitted, list(recorded.reasons)),
        # Exactly SPEC §7's keys (an idempotent replay shows in `differences` and in
        # `explanation.idempotent_replay`).
        replayed=Outcome(replayed.ok, list(replayed.reasons)),
        reproduced=result.reproduced,
        differences=list(result.differences),
        explanation=explanation,
        request=msgspec.to_builtins(recorded.request),
        reasons=msgspec.UNSET if result.reproduced else [NOT_REPRODUCED],
    )


def settlement_audit(result: au.SettlementAudit) -> AuditAnswer:

    record, replayed = result.record, result.replayed
    data = msgspec.to_builtins(result.recorded_payload)
    view = decision_view(record.goal or "", result.recorded_payload, replayed)
    return AuditAnswer(
        ok=result.reproduced,
        event=AuditEvent(
            seq=record.seq,
            hash=record.hash,
            kind=record.kind,
            at=record.at,
            goal=record.goal,
            run=None,
            agent=data.get("agent"),
            turn=data.get("turn"),
        ),
        recorded=Outcome(True, []),
        replayed=Outcome(replayed.ok and replayed.kind == record.kind, list(replayed.reasons)),
        replayed_idempotent=replayed.idempotent,
        reproduced=result.reproduced,
        differences=list(result.differences),
        explanation=Explanation(
            binding_constraint=replayed.reasons[0] if replayed.reasons else None,
            shortfall_tpm=None,
            usage_tpm=None,
            reserved_tpm=None,
            load_tpm=None,
            target_tpm=None,
            top_contributors=[],
            cooldown_until=None,
            coverage=None,
            earliest_admissible_at=record.at if replayed.ok else None,
            settlement=msgspec.to_builtins(view),
        ),
        request=data,
        reasons=msgspec.UNSET if result.reproduced else [NOT_REPRODUCED],
    )


# -- metrics -----------------------------------------------------------------------------


def _goal_metrics(
    families: dict[str, MetricFamily],
    goal: str,
    state: cap.GoalCapacity,
    at_us: int,
    pool: cap.PoolContext | None = None,
) -> None:

    ev = cap.evaluate(state, at_us)

    def add(name: str, value: Number | None, **labels: str) -> None:
        families[name].samples.append(MetricSample({"goal": goal, **labels}, value))

    parts = ev.usage.parts
    add("quotaledger_usage_tpm", parts.uncached_input, counter="uncached_input")
    add("quotaledger_usage_tpm", parts.cached_input, counter="cached_input")
    add("quotaledger_usage_tpm", parts.cache_write_input, counter="cache_write_input")
    add("quotaledger_usage_tpm", parts.output, counter="output")
    add("quotaledger_usage_weighted_tpm", ev.usage.usage_tpm)
    add("quotaledger_reserved_tpm", ev.reserved_tpm)
    add("quotaledger_load_tpm", ev.load_tpm)
    if ev.tokens is not None and ev.tokens.target_tpm is not None:
        add("quotaledger_target_tpm", ev.tokens.target_tpm)
        add("quotaledger_quota_tpm", ev.tokens.quota_tpm)
        for run_class in cap.RUN_CLASSES:
            add("quotaledger_headroom_tpm", ev.headroom_tpm(run_class), **{"class": run_class})
    counts = ev.active_cases
    for dimension, dim in ev.dimensions.items():
        assert dim.limit is not None
        add("quotaledger_load", dim.load, dimension=dimension)
        add("quotaledger_target", dim.limit.target, dimension=dimension)
    for dimension, dim in cap.every_dimension(state, at_us).items():
        view = dim.provider
        if view is not None and view.live and view.report.remaining is not None:
            add("quotaledger_provider_remaining", view.report.remaining, dimension=dimension)
    add("quotaledger_active_runs", counts.baseline, group="baseline")
    add("quotaledger_active_runs", counts.test, group="test")
    add("quotaledger_active_runs", counts.total, group="total")
    remaining_us = 0
    if ev.cooldown_until_us is not None:
        remaining_us = max(0, ev.cooldown_until_us - at_us)
    add("quotaledger_cooldown_remaining_seconds", au.seconds(remaining_us))
    add("quotaledger_observation_stale", int(ev.tokens is not None and ev.observation_stale))
    add("quotaledger_usage_unmetered", int(ev.usage.unmetered_in_window))
    pool_reasons = cap.ready_pool_reasons(state, at_us, pool, goal)
    add("quotaledger_admission_ready", int(cap.admission_ready(ev, pool_reasons)))
    add("quotaledger_admissions_total", state.admissions_total)
    for reason, count in sorted(state.refusals_total.items()):
        add("quotaledger_refusals_total", count, reason=reason)
    add("quotaledger_refusal_events_total", state.refusal_events_total)
    add("quotaledger_rejections_total", state.rejections_total)
    add("quotaledger_releases_total", state.releases_total)
    _spend_metrics(families, goal, ev.spend)


def _queue_metrics(
    families: dict[str, MetricFamily], queue: str, members: list[cap.GoalCapacity], at_us: int
) -> None:
    """SPEC §12.2's families, for a queue that ever held an entry: a goal's own,
    labelled by its name, or a pool's (its members' entries and waits), by the pool's."""

    def add(name: str, value: Number, suffix: str = "", **labels: str) -> None:
        sample = MetricSample({"queue": queue, **labels}, value, suffix)
        families[name].samples.append(sample)

    waiting = [e for m in members for e in m.queue.values() if e.waiting_at(at_us)]
    add("quotaledger_queue_length", len(waiting))
    oldest_us = min((e.at_us for e in waiting), default=at_us)
    add("quotaledger_queue_oldest_seconds", au.seconds(max(0, at_us - oldest_us)))
    counts = [0] * (len(QUEUE_WAIT_BUCKETS_S) + 1)
    for member in members:
        for index, count in enumerate(member.queue_waits):
            counts[index] += count
    bounds = [f"{bound:g}" for bound in QUEUE_WAIT_BUCKETS_S] + ["+Inf"]
    total = 0
    for bound, count in zip(bounds, counts, strict=True):
        total += count
        add("quotaledger_queue_wait_seconds", total, "_bucket", le=bound)
    waited_us = sum(m.queue_wait_sum_us for m in members)
    add("quotaledger_queue_wait_seconds", au.seconds(waited_us), "_sum")
    add("quotaledger_queue_wait_seconds", total, "_count")


def _spend_metrics(families: dict[str, MetricFamily], goal: str, spend: cap.Spend) -> None:
    """SPEC §12.4's families: spend since cap_since (all of it without a cap), the caps."""

    def add(name: str, value: Number, **labels: str) -> None:
        families[name].samples.append(MetricSample({"goal": goal, **labels}, value))

    add("quotaledger_spend_tokens_total", spend.tokens)
    add("quotaledger_spend_usd_total", cap.usd_number(spend.usd_micro))
    if spend.cap_tokens is not None:
        add("quotaledger_spend_cap", spend.cap_tokens, unit="tokens")
    if spend.cap_usd_micro is not None:
        add("quotaledger_spend_cap", cap.usd_number(spend.cap_usd_micro), unit="usd")


__all__ = ["OperatorService"]
