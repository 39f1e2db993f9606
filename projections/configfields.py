"""The config flags `configure` and `whatif` take (SPEC §3.5, §3.6), as one TypedDict.

Apart from configrule (which checks its field list against this one) so that a
runner's `observe` or `admit`, whose service declares `configure`'s keywords, loads
this and not the rule.
"""

from __future__ import annotations

from typing import TypedDict


class ConfigFields(TypedDict, total=False):
    """The config flags of `configure` and `whatif`; None (or absent) means not given."""

    max_active_cases: int | None
    target_active_cases: int | None
    max_baseline_cases: int | None
    max_test_cases: int | None
    reserved_test_cases: int | None
    quota_tpm: int | None
    target_tpm: int | None
    evaluator_reserve_tpm: int | None
    cold_start_reserve_tpm: int | None
    cached_input_weight: float | None
    max_observation_age_s: int | None
    cooldown_base_s: int | None
    cooldown_max_s: int | None
    quota_itpm: int | None
    target_itpm: int | None
    evaluator_reserve_itpm: int | None
    cold_start_reserve_itpm: int | None
    quota_otpm: int | None
    target_otpm: int | None
    evaluator_reserve_otpm: int | None
    cold_start_reserve_otpm: int | None
    quota_rpm: int | None
    target_rpm: int | None
    evaluator_reserve_rpm: int | None
    cold_start_reserve_rpm: int | None
