"""inspect_ai hooks that admit, observe and release every sample on one goal (SPEC §13.1).

    pip install 'quotaledger[inspect]'
    export QUOTALEDGER_JOURNAL=http://ledger-host:8765 QUOTALEDGER_TOKEN=...
    export QUOTALEDGER_INSPECT_GOAL=swe-bench QUOTALEDGER_INSPECT_FORECAST_TPM=20000
    inspect eval task.py --model openai/gpt-4o-mini

Installed, this module is loaded by every `inspect eval` (the `inspect_ai` entry point
`quotaledger`); its `Hooks` class `quota` (`quotaledger/quota`, which
`INSPECT_REQUIRED_HOOKS` can demand) is enabled while `QUOTALEDGER_INSPECT_GOAL` is set.
Per sample (and epoch), with the run and case of `adapters.inspect_names`:
- `on_sample_init` (which inspect awaits before the sample runs, outside its time
  limits) admits it, waiting in the goal's queue (`admit --queue --wait`,
  `adapters.inspect_admission`) up to `QUOTALEDGER_INSPECT_WAIT_S`; a sample that is
  not admitted does not run: its entry is withdrawn and the hook raises inspect's
  `LimitExceededError` naming the refusal's reasons (or the fault that kept the
  ledger from answering), so the sample ends as an error, never scored as the model's
  answer; a sample cancelled while it waits withdraws its entry;
- `on_sample_attempt_start` admits a retry (`--retry-on-error`) of a sample that init
  did not admit (inspect calls init once per sample); refused there, the attempt
  does not run and `on_sample_scoring` ends it as an error, unscored (an admission
  at init covers the sample's retries);
- `on_model_usage` observes each model call with the sample's run (a context variable
  set at init: the usage data names no sample) and its `model`;
- each HTTP 429 is rejected once with the sample's run: inspect's own retries
  (`on_model_retry`) and the provider SDK's (the 429 responses a model event lists,
  by request id; an event is delivered more than once);
- `on_sample_end` releases the run; `on_run_end` releases what the ending run of this
  process still holds (a sample cancelled mid-run has no `on_sample_end`) and
  withdraws once more the queue entries its cancelled waits left.

The hooks never break an eval on their own faults: a ledger that cannot be reached
fails the sample's admission (it does not run unadmitted), logged at ERROR; an
observation or rejection that cannot be written is logged at ERROR with its counts and
counted in `failures`. Ledger calls run in worker threads, each on a `Ledger` of its
own (a pool), so a slow fsync or a waiting admission never blocks the event loop, and
waiting samples have threads of their own, so they never hold up another sample's
observation.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from inspect_ai.event import ModelEvent
from inspect_ai.hooks import (
    Hooks,
    ModelRetry,
    ModelUsageData,
    RunEnd,
    SampleAttemptStart,
    SampleEnd,
    SampleEvent,
    SampleInit,
    SampleScoring,
    hooks,
)
from inspect_ai.log import EvalSampleSummary, transcript
from inspect_ai.util import LimitExceededError

from quotaledger.adapters import is_request_id
from quotaledger.adapters.inspect_admission import THREADS_MAX, Admissions, Ledgers, Waiting
from quotaledger.adapters.inspect_names import (
    GOAL_ENV,
    WAIT_S_ENV,
    Settings,
    case_name,
    enabled,
    run_name,
    settings,
    worded_for_environment,
)
from quotaledger.journal.errors import Error, InvalidInput

RATE_LIMITED = 429

log = logging.getLogger("quotaledger")


@dataclass
class Held:
    """A sample this process admitted: its run, and the 429s already rejected."""

    goal: str
    run: str
    inspect_run: str
    rejected: set[str] = field(default_factory=set)


_SAMPLE: ContextVar[Held | None] = ContextVar("quotaledger_inspect_sample", default=None)
"""The sample whose task this is: set by `on_sample_init`, read by `on_model_usage`."""


@hooks(
    name="quota",
    description="quotaledger: every sample admitted, observed and released on one goal",
)
class Quota(Hooks):
    """The hooks (one instance per process, shared by every run and sample)."""

    def __init__(self) -> None:
        self.failures = 0
        """Observations, rejections and releases that could not be written (each logged)."""
        self._held: dict[str, Held] = {}
        self._held_lock = threading.Lock()
        self._ledgers: Ledgers | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._admissions = Admissions()
        self._refused: dict[str, str] = {}
        """Samples whose retry was refused at its start, by uuid: what ends their scoring."""

    def enabled(self) -> bool:
        return enabled(os.environ)

    # -- admission ---------------------------------------------------------------------

    async def on_sample_init(self, data: SampleInit) -> None:
        await self._admit(data.eval_id, data.sample_id, data.summary, data.run_id)

    async def on_sample_attempt_start(self, data: SampleAttemptStart) -> None:
        """A retry (`--retry-on-error`) of a sample that init did not admit: inspect
        calls `on_sample_init` once per sample, so it is admitted here (inside the
        sample's time limit). A sample admitted at init keeps that admission for its
        retries. Refused here, the raise is a limit to inspect, which skips the solver
        and goes on to scoring: `on_sample_scoring` raises it again, as an error; so
        does a wait that the sample's time limit cut short (a cancellation here)."""
        if data.sample_id in self._held:
            return
        try:
            await self._admit(data.eval_id, data.sample_id, data.summary, data.run_id)
        except LimitExceededError as refusal:
            self._refused[data.sample_id] = refusal.message
            raise
        except anyio.get_cancelled_exc_class():
            run = run_name(data.eval_id, data.sample_id)
            goal = os.environ.get(GOAL_ENV, "").strip()
            self._refused[data.sample_id] = (
                f"quotaledger: goal {goal}: run {run} was not admitted: its wait in the queue "
                "was cut short (the sample's time limit, or a cancel)"
            )
            raise

    async def on_sample_scoring(self, data: SampleScoring) -> None:
        refusal = self._refused.pop(data.sample_id, None)
        if refusal is not None:  # never scored: the attempt was not admitted
            raise LimitExceededError("custom", value=1, limit=0, message=refusal)

    async def _admit(
        self, eval_id: str, sample_uuid: str, summary: EvalSampleSummary, inspect_run: str
    ) -> None:
        """Admit the sample, waiting in the goal's queue; not admitted, raise what ends
        it as an error naming why."""
        run = run_name(eval_id, sample_uuid)
        case = case_name(summary.id, summary.epoch)
        goal = os.environ.get(GOAL_ENV, "").strip()
        try:
            config = settings(os.environ)
            waiting = Waiting(config.goal, run, inspect_run)
            request = config.admission(run, case)
            answer = await self._admissions.wait(self._ledgers_of(config), config, waiting, request)
        except Exception as error:  # the ledger's fault or the settings': it does not run
            why = _described(error)
            log.error("quotaledger: goal %s: sample %s was not admitted: %s", goal, run, why)
            raise _not_admitted(f"goal {goal}: run {run} could not be admitted ({why})") from None
        if not answer.get("admitted"):
            reasons = ", ".join(answer.get("reasons") or ()) or "refused"
            if answer.get("queued"):
                message = f"goal {goal}: run {run} waited {config.wait_s} s in the queue"
                message += f" ({WAIT_S_ENV}) and was not admitted: {reasons}"
            else:
                message = f"goal {goal} refused run {run}: {reasons}"
            log.warning("quotaledger: %s", message)
            raise _not_admitted(message)
        held = Held(config.goal, run, inspect_run)
        with self._held_lock:
            self._held[sample_uuid] = held
        _SAMPLE.set(held)

    # -- what the model calls cost ------------------------------------------------------

    async def on_model_usage(self, data: ModelUsageData) -> None:
        held = _SAMPLE.get()
        usage = data.usage
        counts = {
            "uncached_input": usage.input_tokens,
            "cached_input": usage.input_tokens_cache_read or 0,
            "cache_write_input": usage.input_tokens_cache_write or 0,
            "output": usage.output_tokens,
            "requests": 1,
        }
        model = data.model_name if is_request_id(data.model_name) else None
        await self._record(
            "observation",
            counts,
            "observe",
            run=held.run if held else None,
            model=model,
            source=f"inspect_ai {data.model_name}"[:200],
            **counts,
        )

    async def on_model_retry(self, data: ModelRetry) -> None:
        if data.status_code != RATE_LIMITED:
            return
        held = _SAMPLE.get() or self._held.get(data.sample_id or "")
        # The 429 that made inspect retry is the last response its failed model event
        # lists (when the provider named it): the event's delivery must not count it again.
        await self._reject_once(held, _last_rate_limited_request(), data.model_name)

    async def on_sample_event(self, data: SampleEvent) -> None:
        event = data.event
        if not isinstance(event, ModelEvent) or not event.request_ids:
            return
        held = self._held.get(data.sample_id)
        for response in event.request_ids:
            if response.status == RATE_LIMITED:  # one the provider SDK retried by itself
                await self._reject_once(held, response.id, event.model)

    async def _reject_once(self, held: Held | None, request_id: str | None, model: str) -> None:
        if held is not None and request_id is not None:
            if request_id in held.rejected:
                return
            held.rejected.add(request_id)
        kwargs: dict[str, Any] = {"detail": f"HTTP 429 from {model}"[:500]}
        if request_id is not None and is_request_id(request_id):
            kwargs["request_id"] = request_id
        counts = {"request_id": request_id, "model": model}
        await self._record("rejection", counts, "reject", run=held.run if held else None, **kwargs)

    # -- the end of a sample, of a run -----------------------------------------------

    async def on_sample_end(self, data: SampleEnd) -> None:
        self._refused.pop(data.sample_id, None)
        with self._held_lock:
            held = self._held.pop(data.sample_id, None)
        if held is not None:
            await self._release(held)

    async def on_run_end(self, data: RunEnd) -> None:
        with self._held_lock:
            ending = [uuid for uuid, held in self._held.items() if held.inspect_run == data.run_id]
            still = [self._held.pop(uuid) for uuid in ending]
        for held in still:
            await self._release(held)
        ledgers = self._ledgers
        if ledgers is not None:
            await self._admissions.withdraw_left(ledgers, data.run_id)

    async def _release(self, held: Held) -> None:
        await self._record("release", {"run": held.run}, "release", goal=held.goal, run=held.run)

    # -- the ledger --------------------------------------------------------------------

    async def _record(self, what: str, counts: dict[str, Any], method: str, **kwargs: Any) -> None:
        """`method(**kwargs)` on the ledger; a failure logged at ERROR with what was lost."""
        goal = kwargs.get("goal") or os.environ.get(GOAL_ENV, "").strip()
        try:
            config = settings(os.environ)
            call = self._ledgers_of(config).call
            await self._in_thread(lambda: call(method, **{"goal": goal, **kwargs}))
        except Exception as error:  # never the eval's problem, never silent
            self.failures += 1
            log.error(
                "quotaledger: goal %s: an inspect_ai %s was not recorded (%s); lost: %s",
                goal,
                what,
                _described(error),
                counts,
            )

    def _ledgers_of(self, config: Settings) -> Ledgers:
        ledgers = self._ledgers
        if ledgers is None or ledgers.target != config.journal:
            ledgers = self._ledgers = Ledgers(config.journal)
        return ledgers

    async def _in_thread(self, function: Callable[..., Any], *args: Any) -> Any:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(THREADS_MAX)
        return await anyio.to_thread.run_sync(function, *args, limiter=self._limiter)


def _last_rate_limited_request() -> str | None:
    """The request id of the 429 that ended the sample's latest model call, if it was one."""
    try:
        event = transcript().history.find_last(lambda e: isinstance(e, ModelEvent))
    except Exception:  # no transcript here: the retry names no request
        return None
    if not isinstance(event, ModelEvent) or event.error is None or not event.request_ids:
        return None
    last = event.request_ids[-1]
    return last.id if last.status == RATE_LIMITED else None


def _not_admitted(message: str) -> LimitExceededError:
    """What ends a sample that was not admitted: the one exception inspect lets a hook
    raise (any other is swallowed, and the sample would run unadmitted)."""
    return LimitExceededError("custom", value=1, limit=0, message=f"quotaledger: {message}")


def _described(error: BaseException) -> str:
    if isinstance(error, InvalidInput):
        return f"{error.code}: {worded_for_environment(error)}"
    if isinstance(error, Error):
        return f"{error.code}: {error.message}"
    return f"{type(error).__name__}: {error}"


__all__ = ["Quota"]
