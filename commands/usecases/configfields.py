"""The capacity config fields a request may give (SPEC §3.5, §3.6): `whatif`'s
overrides and `configure`'s fields: the one declaration of them (asserted below to
name `projections.capacity.FIELDS`; `cli.config_options` makes their flags).

A request type that takes them derives from `ConfigFieldsRequest`. The fields stay
plain numbers here: their ranges and relations are the config rule's
(`projections.capacity.config`), which words every problem of a config at once
(`invalid_config`). A given value outside its field's range is out of range whatever
the journal holds: a client of a server refuses it before sending
(`check_contents`), in the config rule's words and code; `whatif` refuses it on every
face (it would otherwise ignore an override of a dimension the goal lacks).
"""

import math
from typing import Annotated, Any

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.projections.capacity import CONFIG_RANGES, FIELDS, LIMIT_RANGES
from quotaledger.usecases.decode import Request
from quotaledger.usecases.fields import Rule


def check_finite(name: str, value: Any) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(
            f"{name} must be a finite number, not {value!r}", code=codes.INVALID_CONFIG
        )
    return value


ConfigNumber = Annotated[float, Rule(check_finite, code=codes.INVALID_CONFIG)]
"""A fractional config field: its range is the config rule's (`invalid_config`), as
is a NaN's or an infinity's, which decoding refuses before any rule can."""


def check_observation_age(name: str, value: Any) -> object:
    check_finite(name, value)
    if isinstance(value, int | float) and value == 0:
        # In the journal's range (a recorded 0 still reads), but never what a user
        # means: no observation would ever be fresh after its own instant, so every
        # later admit would be refused `usage_observation_stale`.
        raise InvalidInput(
            f"{name} must be more than 0: at 0 no observation is ever fresh, and every "
            "admit would be refused usage_observation_stale",
            code=codes.INVALID_CONFIG,
        )
    return value


ConfigSeconds = Annotated[
    int | float, Rule(check_observation_age, always=True, code=codes.INVALID_CONFIG)
]


class ConfigFieldsRequest(Request):
    """The config fields; None means not given."""

    max_active_cases: int | None = None
    target_active_cases: int | None = None
    max_baseline_cases: int | None = None
    max_test_cases: int | None = None
    reserved_test_cases: int | None = None
    quota_tpm: int | None = None
    target_tpm: int | None = None
    evaluator_reserve_tpm: int | None = None
    cold_start_reserve_tpm: int | None = None
    cached_input_weight: ConfigNumber | None = None
    max_observation_age_s: ConfigSeconds | None = None  # a fraction of a second too
    cooldown_base_s: int | None = None
    cooldown_max_s: int | None = None
    quota_itpm: int | None = None
    target_itpm: int | None = None
    evaluator_reserve_itpm: int | None = None
    cold_start_reserve_itpm: int | None = None
    quota_otpm: int | None = None
    target_otpm: int | None = None
    evaluator_reserve_otpm: int | None = None
    cold_start_reserve_otpm: int | None = None
    quota_rpm: int | None = None
    target_rpm: int | None = None
    evaluator_reserve_rpm: int | None = None
    cold_start_reserve_rpm: int | None = None
    quota_tpd: int | None = None
    target_tpd: int | None = None
    evaluator_reserve_tpd: int | None = None
    cold_start_reserve_tpd: int | None = None
    quota_rpd: int | None = None
    target_rpd: int | None = None
    evaluator_reserve_rpd: int | None = None
    cold_start_reserve_rpd: int | None = None

    INVALID = "invalid capacity config: "
    """How an invalid config is introduced (the config rule's words)."""

    def check_contents(self) -> None:
        """A given value outside its field's range, whatever the journal holds: a client
        of a server refuses it before sending, in the config rule's words (the local
        call's rule words every problem of the config it makes, derived fields too)."""
        refuse_out_of_range(self, self.INVALID)

    def config_fields(self) -> dict[str, Any]:
        """The given fields, in the config rule's order (None: not given)."""
        return {name: getattr(self, name) for name in FIELDS}


# The config rule's field list is the one list: this declaration (for the request's
# types and schema) must name exactly its fields, in its order.
assert ConfigFieldsRequest.__struct_fields__ == FIELDS


def refuse_out_of_range(request: ConfigFieldsRequest, introduced: str) -> None:
    """`invalid_config` naming every given field outside its range, if any."""
    problems = [
        (name, *range_of(name), value)
        for name, value in request.config_fields().items()
        if value is not None and not range_of(name)[0] <= value <= range_of(name)[1]
    ]
    if not problems:
        return
    error = InvalidInput(
        lambda names: (
            introduced
            + "; ".join(
                f"{names(n)} must be from {lo} to {hi}, got {v}" for n, lo, hi, v in problems
            )
        ),
        code=codes.INVALID_CONFIG,
        about=tuple(name for name, *_ in problems),
    )
    error.context["problems"] = [
        f"{n} must be from {lo} to {hi}, got {v}" for n, lo, hi, v in problems
    ]
    raise error


def range_of(name: str) -> tuple[float, float]:
    """A config field's range, as the config rule's tables state it (a dimension's
    field, `target_itpm`, by its part's)."""
    if name in CONFIG_RANGES:
        return CONFIG_RANGES[name]
    return LIMIT_RANGES[name.rpartition("_")[0]]
