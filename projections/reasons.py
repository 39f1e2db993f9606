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
)
ADMISSION_REASONS = (
    RUN_EXISTS_WITH_DIFFERENT_REQUEST,
    NOT_CONFIGURED,
    *CASE_GATE_REASONS,
    *TOKEN_GATE_REASONS,
)
"""Every reason `decide_admission` can give, in the order it reports them."""

CAPACITY_REASONS = (*ADMISSION_REASONS, CONFIG_BELOW_OCCUPANCY, RUN_NOT_ACTIVE)
