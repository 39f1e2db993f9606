"""Reason codes: the public words a refusal is made of (SPEC §3, §4, §5, §8).

Every reason code of every domain is listed here, once. Each is a plain string
constant so callers compare against a name, never a literal they might misspell. The
tuples give the documented order in which the admission decision reports them.
"""

from __future__ import annotations

# -- admission: idempotency (SPEC §3.3) -------------------------------------------
RUN_EXISTS_WITH_DIFFERENT_REQUEST = "run_exists_with_different_request"

# -- admission: nothing to decide with -----------------------------------------------
NOT_CONFIGURED = "not_configured"

# -- admission: case gate, in reporting order ----------------------------------------
TARGET_CAPACITY_EXHAUSTED = "target_capacity_exhausted"
TOTAL_CAPACITY_EXHAUSTED = "total_capacity_exhausted"
BASELINE_CAPACITY_EXHAUSTED = "baseline_capacity_exhausted"
TEST_CAPACITY_EXHAUSTED = "test_capacity_exhausted"
RESERVED_TEST_CAPACITY = "reserved_test_capacity"
CASE_ARM_REQUIRED = "case_arm_required"

# -- admission: token gate, in reporting order ---------------------------------------
TOKEN_FORECAST_REQUIRED = "token_forecast_required"
FORECAST_EXCEEDS_TARGET = "forecast_exceeds_target"
CAPACITY_COOLDOWN_ACTIVE = "capacity_cooldown_active"
USAGE_UNMETERED_IN_WINDOW = "usage_unmetered_in_window"
USAGE_OBSERVATION_STALE = "usage_observation_stale"
TOKEN_HEADROOM_EXHAUSTED = "token_headroom_exhausted"
EVALUATOR_RESERVE_PROTECTED = "evaluator_reserve_protected"

TPM_PROVIDER_EXHAUSTED = "tpm_provider_exhausted"

# -- admission: the other dimensions of the token gate (SPEC §3.6) ---------------------
# For D in itpm, otpm, rpm: D_forecast_required, D_forecast_exceeds_target,
# D_headroom_exhausted, D_evaluator_reserve_protected, D_provider_exhausted.
DIMENSION_CHECKS = (
    "forecast_required",
    "forecast_exceeds_target",
    "headroom_exhausted",
    "evaluator_reserve_protected",
    "provider_exhausted",
)
"""A dimension's checks, in the order its reasons are reported."""
DIMENSION_REASONS: dict[str, dict[str, str]] = {
    "tpm": {
        "forecast_required": TOKEN_FORECAST_REQUIRED,
        "forecast_exceeds_target": FORECAST_EXCEEDS_TARGET,
        "headroom_exhausted": TOKEN_HEADROOM_EXHAUSTED,
        "evaluator_reserve_protected": EVALUATOR_RESERVE_PROTECTED,
        "provider_exhausted": TPM_PROVIDER_EXHAUSTED,
    },
    **{
        dimension: {check: f"{dimension}_{check}" for check in DIMENSION_CHECKS}
        for dimension in ("itpm", "otpm", "rpm")
    },
    # The daily windows (SPEC §12.3): no provider reports them, so no provider reason.
    **{
        dimension: {check: f"{dimension}_{check}" for check in DIMENSION_CHECKS[:4]}
        for dimension in ("tpd", "rpd")
    },
}
"""Dimension -> check -> reason code (tpm keeps the names it had before dimensions)."""
REASON_DIMENSION: dict[str, str] = {
    reason: dimension
    for dimension, checks in DIMENSION_REASONS.items()
    for reason in checks.values()
}
"""The dimension a reason belongs to (the gate-wide reasons belong to none)."""

# -- admission: spend caps (SPEC §12.4), after every gate's reasons ---------------------
SPEND_CAP_REACHED = "spend_cap_reached"
"""Spent >= cap: nothing new starts (not queueable)."""
SPEND_CAP_EXCEEDED = "spend_cap_exceeded"
"""Spent + reserved + this request's forecast > cap (a release lowers what is reserved)."""
CAP_REASONS = (SPEND_CAP_REACHED, SPEND_CAP_EXCEEDED)

# -- admission: the goal's pool (SPEC §12.1), after the goal's own reasons ---------------
POOL_COOLDOWN_ACTIVE = "pool_cooldown_active"
"""A member's provider rejection started the pool's cooldown (queueable, pool-wide)."""
POOL_FORECAST_REQUIRED = "pool_forecast_required"
"""The request lacks the forecast of some pool dimension (not queueable)."""
POOL_FORECAST_EXCEEDS_TARGET = "pool_forecast_exceeds_target"
"""Some forecast is over the pool's target or the goal's share plus borrowing limit of
it: it can never fit (not queueable)."""
POOL_HEADROOM_EXHAUSTED = "pool_headroom_exhausted"
"""The pool's load plus the forecast is over its target (queueable, pool-wide)."""
POOL_BORROWING_LIMIT = "pool_borrowing_limit"
"""The goal's own load plus the forecast is over its share plus borrowing limit
(queueable; it holds back the goal's own entries only)."""
POOL_SHARE_PROTECTED = "pool_share_protected"
"""It fits the pool but would take what another member is guaranteed (queueable,
pool-wide)."""
POOL_PROVIDER_EXHAUSTED = "pool_provider_exhausted"
"""The organisation's live provider report leaves less than the forecast (queueable,
pool-wide)."""
POOL_SPEND_CAP_REACHED = "pool_spend_cap_reached"
"""The pool's members together spent its cap: nothing new starts (not queueable)."""
POOL_SPEND_CAP_EXCEEDED = "pool_spend_cap_exceeded"
"""The pool's spent + reserved + this request's forecast > its cap (queueable,
pool-wide: a release lowers what is reserved)."""
POOL_CAP_REASONS = (POOL_SPEND_CAP_REACHED, POOL_SPEND_CAP_EXCEEDED)
POOL_REASONS = (
    POOL_COOLDOWN_ACTIVE,
    POOL_FORECAST_REQUIRED,
    POOL_FORECAST_EXCEEDS_TARGET,
    POOL_HEADROOM_EXHAUSTED,
    POOL_BORROWING_LIMIT,
    POOL_SHARE_PROTECTED,
    POOL_PROVIDER_EXHAUSTED,
)
"""The pool's reasons, in the order they are reported, each once (SPEC §12.1)."""

# -- the queue (SPEC §12.2): after every other reason ----------------------------------
QUEUE_AHEAD = "queue_ahead"
"""An entry of equal or higher priority that would block this request is waiting."""
RUN_NOT_QUEUED = "run_not_queued"
"""`admit --cancel` of a run that has no entry in the queue: nothing to cancel."""

# -- configure and release (SPEC §3.1, §3.4) -----------------------------------------
CONFIG_BELOW_OCCUPANCY = "config_below_occupancy"
RUN_NOT_ACTIVE = "run_not_active"

# -- observe and reject: idempotent observations (SPEC §11) ----------------------------
REQUEST_ID_CONFLICT = "request_id_conflict"
"""A repeat of a request id (within 900 s) whose payload differs from the first's."""

CASE_GATE_REASONS = (
    TARGET_CAPACITY_EXHAUSTED,
    TOTAL_CAPACITY_EXHAUSTED,
    BASELINE_CAPACITY_EXHAUSTED,
    TEST_CAPACITY_EXHAUSTED,
    RESERVED_TEST_CAPACITY,
    CASE_ARM_REQUIRED,
)
TOKEN_GATE_REASONS = (
    TOKEN_FORECAST_REQUIRED,
    FORECAST_EXCEEDS_TARGET,
    CAPACITY_COOLDOWN_ACTIVE,
    USAGE_UNMETERED_IN_WINDOW,
    USAGE_OBSERVATION_STALE,
    TOKEN_HEADROOM_EXHAUSTED,
    EVALUATOR_RESERVE_PROTECTED,
    TPM_PROVIDER_EXHAUSTED,
    *(DIMENSION_REASONS[d][check] for d in ("itpm", "otpm", "rpm") for check in DIMENSION_CHECKS),
    *(reason for d in ("tpd", "rpd") for reason in DIMENSION_REASONS[d].values()),
)
ADMISSION_REASONS = (
    RUN_EXISTS_WITH_DIFFERENT_REQUEST,
    NOT_CONFIGURED,
    *CASE_GATE_REASONS,
    *TOKEN_GATE_REASONS,
    *CAP_REASONS,
    *POOL_REASONS,
    *POOL_CAP_REASONS,
)
"""Every reason `decide_admission` can give, in the order it reports them."""

CAPACITY_REASONS = (
    *ADMISSION_REASONS,
    QUEUE_AHEAD,
    RUN_NOT_QUEUED,
    CONFIG_BELOW_OCCUPANCY,
    RUN_NOT_ACTIVE,
    REQUEST_ID_CONFLICT,
)

# -- host continuation (SPEC §4): phase, start, continue, exit, return, replan ---------
DEADLINE_NOT_IN_FUTURE = "deadline_not_in_future"
DEADLINE_TOO_FAR = "deadline_too_far"
PHASE_EXISTS_WITH_DIFFERENT_REQUEST = "phase_exists_with_different_request"
LANE_FAILED = "lane_failed"
ATTEMPT_IN_FLIGHT = "attempt_in_flight"
NO_OPEN_PHASE = "no_open_phase"
PHASE_DEADLINE_PASSED = "phase_deadline_passed"
STOP_REQUESTED = "stop_requested"
REPLAN_UNSETTLED = "replan_unsettled"
SESSION_MISMATCH = "session_mismatch"
PROFILE_MISMATCH = "profile_mismatch"
RETRY_LIMIT_REACHED = "retry_limit_reached"
CAPACITY_NOT_READY = "capacity_not_ready"
ATTEMPT_ALREADY_FINISHED = "attempt_already_finished"
ATTEMPT_EXISTS_WITH_DIFFERENT_REQUEST = "attempt_exists_with_different_request"
BOUND_EVENT_NOT_A_FAILURE = "bound_event_not_a_failure"
BOUND_EVENT_NOT_FOUND = "bound_event_not_found"
BOUND_FAILURE_SUPERSEDED = "bound_failure_superseded"
PROCESS_NOT_EXITED = "process_not_exited"
HISTORY_CHANGED = "history_changed"
FAILURE_NOT_CONTINUABLE = "failure_not_continuable"
ATTEMPT_NOT_FOUND = "attempt_not_found"
EXIT_EXISTS_WITH_DIFFERENT_REQUEST = "exit_exists_with_different_request"
RETURN_EXISTS_WITH_DIFFERENT_REQUEST = "return_exists_with_different_request"
REPLAN_ALREADY_SETTLED = "replan_already_settled"
REPLAN_NOT_OPEN = "replan_not_open"

# -- host continuation: the handoff file, read before any decision (SPEC §4.2) --------
HANDOFF_MISSING = "handoff_missing"
HANDOFF_NOT_REGULAR = "handoff_not_regular"
HANDOFF_TOO_LARGE = "handoff_too_large"
HANDOFF_DIGEST_MISMATCH = "handoff_digest_mismatch"

# -- settlement (SPEC §5). The first six are the spec's; the rest name cases it leaves
# open (see projections/settlement's docstring). ------------------------------------
SETTLEMENT_OWED = "settlement_owed"
TURN_IN_PROGRESS = "turn_in_progress"
QUOTA_THROTTLED = "quota_throttled"
TURN_NOT_OPEN = "turn_not_open"
SPEND_IDENTITY_MISMATCH = "spend_identity_mismatch"
WRITEBACK_NOT_VERIFIED = "writeback_not_verified"
WRITEBACK_AMOUNT_CONFLICT = "writeback_amount_conflict"
"""A second writeback of a turn with a different amount: the first one stands."""
TURN_EXISTS_WITH_DIFFERENT_TASK = "turn_exists_with_different_task"
"""`turn open` names a turn id the agent already opened, for another task."""
TURN_ALREADY_SETTLED = "turn_already_settled"
"""`turn open` names a turn id that was already settled: its effect was spent."""

HOST_REASONS = (
    DEADLINE_NOT_IN_FUTURE,
    DEADLINE_TOO_FAR,
    PHASE_EXISTS_WITH_DIFFERENT_REQUEST,
    LANE_FAILED,
    ATTEMPT_IN_FLIGHT,
    NO_OPEN_PHASE,
    PHASE_DEADLINE_PASSED,
    STOP_REQUESTED,
    REPLAN_UNSETTLED,
    SESSION_MISMATCH,
    PROFILE_MISMATCH,
    RETRY_LIMIT_REACHED,
    CAPACITY_NOT_READY,
    ATTEMPT_ALREADY_FINISHED,
    ATTEMPT_EXISTS_WITH_DIFFERENT_REQUEST,
    BOUND_EVENT_NOT_A_FAILURE,
    BOUND_EVENT_NOT_FOUND,
    BOUND_FAILURE_SUPERSEDED,
    PROCESS_NOT_EXITED,
    HISTORY_CHANGED,
    FAILURE_NOT_CONTINUABLE,
    ATTEMPT_NOT_FOUND,
    EXIT_EXISTS_WITH_DIFFERENT_REQUEST,
    RETURN_EXISTS_WITH_DIFFERENT_REQUEST,
    REPLAN_ALREADY_SETTLED,
    REPLAN_NOT_OPEN,
    HANDOFF_MISSING,
    HANDOFF_NOT_REGULAR,
    HANDOFF_TOO_LARGE,
    HANDOFF_DIGEST_MISMATCH,
)
SETTLEMENT_REASONS = (
    SETTLEMENT_OWED,
    TURN_IN_PROGRESS,
    QUOTA_THROTTLED,
    TURN_NOT_OPEN,
    SPEND_IDENTITY_MISMATCH,
    WRITEBACK_NOT_VERIFIED,
    WRITEBACK_AMOUNT_CONFLICT,
    TURN_EXISTS_WITH_DIFFERENT_TASK,
    TURN_ALREADY_SETTLED,
)
EVERY_REASON = (*CAPACITY_REASONS, *HOST_REASONS, *SETTLEMENT_REASONS)
"""Every reason code of every domain (each in exactly one domain)."""
