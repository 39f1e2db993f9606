"""The base every domain service builds on: a journal handle and shared helpers."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, TypeVar

from quotaledger.journal import InvalidInput, Journal, Transaction, codes
from quotaledger.journal.clock import canonical_at, event_time, wall_us
from quotaledger.journal.identifier import check_identifier
from quotaledger.journal.limits import CHECKPOINT_EVERY_EVENTS, LOCK_TIMEOUT_S_DEFAULT
from quotaledger.journal.store import PendingRecord
from quotaledger.projections.decision import Decision
from quotaledger.projections.ledger import PROJECTOR, LedgerState

if TYPE_CHECKING:
    from quotaledger.projections import capacity as cap

KNOWN_GOALS_SHOWN = 10
"""An unknown_goal (unknown_lane, unknown_agent) message names at most this many known
ones when none is close."""

S = TypeVar("S", bound="ServiceBase")


class ServiceBase:
    """Holds the open journal; domain services are mixins over it."""

    journal: Journal[LedgerState]

    def __init__(self, journal: Journal[LedgerState]) -> None:
        self.journal = journal

    @classmethod
    def open(
        cls: type[S],
        target: str,
        *,
        write: bool = True,
        lock_timeout_s: float = LOCK_TIMEOUT_S_DEFAULT,
        checkpoint_every: int = CHECKPOINT_EVERY_EVENTS,
        allow_corrupt: bool = False,
    ) -> S:
        """This service (`quotaledger.Ledger`: all of them) on the journal at `target`.

        The CLI opens only the service its command uses: importing every service costs
        each call a few milliseconds."""
        journal = Journal.open(
            target,
            PROJECTOR,
            write=write,
            lock_timeout_s=lock_timeout_s,
            checkpoint_every=checkpoint_every,
            allow_corrupt=allow_corrupt,
        )
        return cls(journal)

    @classmethod
    def open_unfolded(
        cls: type[S],
        target: str,
        *,
        lock_timeout_s: float = LOCK_TIMEOUT_S_DEFAULT,
        allow_corrupt: bool = False,
    ) -> S:
        """This service on a reader that has folded nothing yet: for a command whose
        work is one pass over the whole journal (audit, whatif, report), which folds
        the handle in that pass (`Journal.replay`) instead of after a fold of its own."""
        journal = Journal.open(
            target,
            PROJECTOR,
            write=False,
            lock_timeout_s=lock_timeout_s,
            allow_corrupt=allow_corrupt,
            fold=False,
        )
        return cls(journal)

    def close(self) -> None:
        self.journal.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- time -------------------------------------------------------------------------

    def _time_without_lock(self, goal: str, at: str | None, clock: tuple[str, ...] = ()) -> str:
        """A goal's event time by a writer's rules, for work done before (or without)
        the lock: a dry run, or a probe that checks --at before it runs the command.

        The journal's last durable time for the goal stands in for the locked one;
        `clock`: the other streams that share the goal's clock (its pool and the pool's
        members, SPEC §12.1), as `Transaction.time_for` takes them.
        """
        last_at = self.journal.head.goal_last_at
        times = [t for name in (goal, *clock) if (t := last_at.get(name)) is not None]
        return event_time(goal, max(times, default=None), wall_us(), at)

    # -- reading state ------------------------------------------------------------

    def known_goals(self) -> list[str]:
        """Every goal with an event in the journal (as this handle last read it); a
        pool's stream is no goal's (SPEC §12.1)."""
        return sorted(
            name
            for name in self.journal.head.goal_last_at
            if name is not None and not self.is_pool(name)
        )

    def is_pool(self, name: str) -> bool:
        """`name` is a pool's (as far as this handle folded: an unfolded reader knows
        none)."""
        return self.journal.folded and name in self.journal.state.pools.pools

    def require_goal(self, goal: str, *, pools_too: bool = False) -> str:
        """`goal`, if an event names it; else `unknown_goal` (exit 2) naming the closest
        known goals (SPEC §7): for readers, where a typo would read as an empty goal.
        A pool's name is no goal's: `unknown_goal`, pointing at `inspect --pool`
        (`pools_too`: a reader of any stream, `log`, takes a pool's too)."""
        check_identifier("goal", goal, about=True)
        if goal not in self.journal.head.goal_last_at and self.journal.corruption is None:
            self.journal.refresh()  # a long-lived handle: others may have added it
        if goal in self.journal.head.goal_last_at:
            if not pools_too and self.is_pool(goal):
                raise InvalidInput(
                    f"{goal!r} is a pool, not a goal: quotaledger inspect --pool {goal}",
                    code=codes.UNKNOWN_GOAL,
                    goal=goal,
                    closest=[],
                )
            return goal
        raise unknown_goal(goal, self.known_goals())

    def require_configured(self, state: LedgerState, goal: str) -> cap.GoalCapacity:
        """The goal's capacity state, if a `capacity.configured` event names it; else
        `unknown_goal` naming the closest configured goals (SPEC §8): a typo on a
        capacity writer never creates a goal."""
        found = state.capacity.goals.get(goal)
        if found is None or not found.configured:
            known = sorted(name for name, g in state.capacity.goals.items() if g.configured)
            raise unknown_goal(goal, known, what="no capacity.configured event names")
        return found

    def _state_as_of(self, *, at: str | None = None, seq: int | None = None) -> LedgerState:
        """The ledger now, as of time `at` (every event with at <= T) or record `seq`.

        On a handle opened with allow_corrupt, only `seq` inside the verified prefix
        answers; anything else reports the corruption (SPEC §2.4).
        """
        if at is not None and seq is not None:
            raise InvalidInput(
                lambda names: f"give {names('at')} or {names('seq')}, not both",
                code=codes.INVALID_OPTION,
                about=("at", "seq"),
            )
        corruption = self.journal.corruption
        if corruption is not None and (seq is None or seq >= corruption.seq):
            # A handle opened on a corrupt journal shows only its verified prefix.
            raise self.journal.corrupt_error(corruption)
        if seq is not None:
            if seq < 0 or seq > self.journal.head.seq:
                raise seq_out_of_range(seq, self.journal.head.seq)
            return self.journal.fold_as_of(seq=seq)[0]
        if at is not None:
            return self.journal.fold_as_of(at=canonical_at(at))[0]
        return self.journal.state


def unknown_goal(goal: str, known: list[str], what: str = "no event names") -> InvalidInput:
    """`unknown_goal` (exit 2), naming the closest of the `known` goals."""
    closest = difflib.get_close_matches(goal, known, n=3, cutoff=0.6)
    if closest:
        hint = "did you mean " + " or ".join(repr(name) for name in closest) + "?"
    elif known:
        shown = known[:KNOWN_GOALS_SHOWN]
        more = ", ..." if len(known) > len(shown) else ""
        hint = f"known goals: {', '.join(shown)}{more} (quotaledger goals lists them)"
    else:
        hint = "the journal has no goals yet"
    return InvalidInput(
        f"{what} goal {goal!r}; {hint}", code=codes.UNKNOWN_GOAL, goal=goal, closest=closest
    )


def unknown_name(what: str, name: str, goal: str, known: list[str], *, code: str) -> InvalidInput:
    """A reader asked about a `what` (lane, agent) the goal does not have refuses with
    `code` (SPEC §8: exit 2, never an empty answer, which would read as one merely
    idle), naming the closest of those it has."""
    closest = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if closest:
        hint = "did you mean " + " or ".join(repr(one) for one in closest) + "?"
    else:
        shown = ", ".join(known[:KNOWN_GOALS_SHOWN]) or "none yet"
        more = ", ..." if len(known) > KNOWN_GOALS_SHOWN else ""
        hint = f"{what}s: {shown}{more}"
    return InvalidInput(f"goal {goal!r} has no {what} {name!r}; {hint}", code=code, **{what: name})


def conclude(
    txn: Transaction[LedgerState], goal: str, at: str, decision: Decision[Any]
) -> PendingRecord | None:
    """Every writer ends here: append the event its decision names, if it names one.

    A refusal names none (except an admission refusal, which is journaled), nor does
    an idempotent replay. The caller builds its answer from the decision and the
    pending record (None: nothing appended)."""
    if decision.kind is None:
        return None
    return txn.append(decision.kind, goal, decision.payload, at)


def seq_out_of_range(seq: int, head_seq: int) -> InvalidInput:
    """A `seq` past the journal's head (or negative): one code, one wording (SPEC §8)."""
    return InvalidInput(
        lambda name: f"{name} {seq} is not in the journal (head is {head_seq})",
        code=codes.SEQ_OUT_OF_RANGE,
        about="seq",
    )
