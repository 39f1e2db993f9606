"""Reason codes: the public words a refusal is made of (SPEC §3, §8).

Each is a plain string constant so callers compare against a name, never a literal
they might misspell. The tuples give the documented order in which the admission
decision reports them.
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
}
"""Dimension -> check -> reason code (tpm keeps the names it had before dimensions)."""
REASON_DIMENSION: dict[str, str] = {
    reason: dimension
    for dimension, checks in DIMENSION_REASONS.items()
    for reason in checks.values()
}
"""The dimension a reason belongs to (the gate-wide reasons belong to none)."""

# -- configure and release (SPEC §3.1, §3.4) -----------------------------------------
CONFIG_BELOW_OCCUPANCY = "config_below_occupancy"
RUN_NOT_ACTIVE = "run_not_active"

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
)
ADMISSION_REASONS = (
    RUN_EXISTS_WITH_DIFFERENT_REQUEST,
    NOT_CONFIGURED,
    *CASE_GATE_REASONS,
    *TOKEN_GATE_REASONS,
)
"""Every reason `decide_admission` can give, in the order it reports them."""

CAPACITY_REASONS = (*ADMISSION_REASONS, CONFIG_BELOW_OCCUPANCY, RUN_NOT_ACTIVE)
