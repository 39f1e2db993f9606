"""A goal's capacity config (SPEC §3.1, §3.5, §3.6): the gates' terms, the config
Structs with their ranges and rules, and how a configure (or a what-if) changes it.

`configure` changes only what it is given. Every field not given keeps its current
value, except a derived default that was never set explicitly, which follows its
source:

    target_tpm          <- quota_tpm           (90%)
    target_D            <- quota_D             (90%, for D in itpm, otpm, rpm, tpd, rpd)
    target_active_cases <- max_active_cases
    max_test_cases      <- max_active_cases
    max_baseline_cases  <- max_active_cases - reserved_test_cases

The rule handles the config flat, one value per field name as `configure` takes it
(`quota_tpm`, `quota_itpm`, `target_active_cases`, ...; None where a gate or a
dimension is not configured), so one rule serves every field, `explicit` and
`changes` name fields the way a user types them, and `whatif` applies its overrides
by the very same function (`reconfigure`).
"""

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

import msgspec

from quotaledger.journal import InvalidInput, codes
from quotaledger.projections.limits import (
    CASES_MAX,
    COOLDOWN_S_LIMIT,
    OBSERVATION_AGE_S_MAX,
    QUOTA_TPM_MAX,
)
from quotaledger.projections.types import Payload

DEFAULT_TARGET_FRACTION = (9, 10)
DEFAULT_MAX_OBSERVATION_AGE_S = 60
DEFAULT_COOLDOWN_BASE_S = 15
DEFAULT_COOLDOWN_MAX_S = 300

Coverage = Literal["measured", "estimated", "unmetered"]
Dimension = Literal["tpm", "itpm", "otpm", "rpm", "tpd", "rpd"]
LimitDimension = Literal["itpm", "otpm", "rpm", "tpd", "rpd"]
MinuteDimension = Literal["tpm", "itpm", "otpm", "rpm"]
"""The dimensions over the trailing 60 s window: the ones providers report (SPEC §3.6)."""
"""The dimensions configured under TokenConfig.limits (tpm is TokenConfig's own fields)."""
Arm = Literal["baseline", "control", "treatment", "explore"]
RunClass = Literal["solver", "evaluator"]
Group = Literal["baseline", "test"]

COVERAGES: tuple[str, ...] = ("measured", "estimated", "unmetered")
DIMENSIONS: tuple[Dimension, ...] = ("tpm", "itpm", "otpm", "rpm", "tpd", "rpd")
"""Every dimension of the token gate, in the order its reasons are reported (SPEC §3.6,
§12.3)."""
LIMIT_DIMENSIONS: tuple[LimitDimension, ...] = ("itpm", "otpm", "rpm", "tpd", "rpd")
MINUTE_DIMENSIONS: tuple[MinuteDimension, ...] = ("tpm", "itpm", "otpm", "rpm")
DAILY_DIMENSIONS: tuple[Dimension, ...] = ("tpd", "rpd")
"""The dimensions over the trailing day (SPEC §12.3): their load is usage plus what the
active runs may still spend, and they need no observation every minute."""
ARMS: tuple[str, ...] = ("baseline", "control", "treatment", "explore")
RUN_CLASSES: tuple[str, ...] = ("solver", "evaluator")
ARM_GROUP: dict[str, Group] = {
    "baseline": "baseline",
    "control": "test",
    "treatment": "test",
    "explore": "test",
}

Number = int | float
Range = tuple[Number, Number]
"""The lowest and highest value a field takes, both included."""

CONFIG_RANGES: dict[str, Range] = {
    "max_active_cases": (1, CASES_MAX),
    "target_active_cases": (0, CASES_MAX),
    "max_baseline_cases": (0, CASES_MAX),
    "max_test_cases": (0, CASES_MAX),
    "reserved_test_cases": (0, CASES_MAX),
    "quota_tpm": (1, QUOTA_TPM_MAX),
    "target_tpm": (0, QUOTA_TPM_MAX),
    "evaluator_reserve_tpm": (0, QUOTA_TPM_MAX),
    "cold_start_reserve_tpm": (0, QUOTA_TPM_MAX),
    "cached_input_weight": (0.0, 1.0),
    "max_observation_age_s": (0, OBSERVATION_AGE_S_MAX),
    "cooldown_base_s": (0, COOLDOWN_S_LIMIT),
    "cooldown_max_s": (0, COOLDOWN_S_LIMIT),
}
"""Each config field's range (SPEC §3.1), stated once: the Structs' field constraints
and `*_config_problems` both read it."""
LIMIT_RANGES: dict[str, Range] = {
    "quota": (1, QUOTA_TPM_MAX),
    "target": (0, QUOTA_TPM_MAX),
    "evaluator_reserve": (0, QUOTA_TPM_MAX),
    "cold_start_reserve": (0, QUOTA_TPM_MAX),
}
"""The range of each field of a dimension's limit (SPEC §3.6), under `limits`."""


def _range_of(field: str, ranges: dict[str, Range] = CONFIG_RANGES) -> msgspec.Meta:
    """The field's range from `ranges`, as the constraint msgspec checks on decode."""
    low, high = ranges[field]
    return msgspec.Meta(ge=low, le=high)


# -- configuration -------------------------------------------------------------------


class CaseConfig(Payload, frozen=True):
    """The concurrency envelope: how many runs may be active, by group."""

    max_active_cases: Annotated[int, _range_of("max_active_cases")]
    target_active_cases: Annotated[int, _range_of("target_active_cases")]
    max_baseline_cases: Annotated[int, _range_of("max_baseline_cases")]
    max_test_cases: Annotated[int, _range_of("max_test_cases")]
    reserved_test_cases: Annotated[int, _range_of("reserved_test_cases")]

    def __post_init__(self) -> None:
        problems = case_config_problems(self)
        if problems:
            raise ValueError("; ".join(problems))


class DimensionLimit(Payload, frozen=True):
    """One more dimension's envelope: itpm, otpm or rpm per minute (SPEC §3.6), tpd or
    rpd per day (SPEC §12.3)."""

    quota: Annotated[int, _range_of("quota", LIMIT_RANGES)]
    target: Annotated[int, _range_of("target", LIMIT_RANGES)]
    evaluator_reserve: Annotated[int, _range_of("evaluator_reserve", LIMIT_RANGES)]
    cold_start_reserve: Annotated[int, _range_of("cold_start_reserve", LIMIT_RANGES)]
    # Checked by TokenConfig.__post_init__, which names the dimension in its messages.


class TokenConfig(Payload, frozen=True, omit_defaults=True):
    """The token gate: the combined TPM envelope (its own fields) and, under `limits`, the
    other dimensions providers enforce. Rates per minute, durations in seconds.

    `quota_tpm` (and with it `target_tpm`) is null when only `limits` are configured.
    `omit_defaults`: a config without limits encodes as it did before they existed.
    """

    quota_tpm: Annotated[int, _range_of("quota_tpm")] | None
    target_tpm: Annotated[int, _range_of("target_tpm")] | None
    evaluator_reserve_tpm: Annotated[int, _range_of("evaluator_reserve_tpm")]
    cold_start_reserve_tpm: Annotated[int, _range_of("cold_start_reserve_tpm")]
    cached_input_weight: Annotated[float, _range_of("cached_input_weight")]
    # Seconds with a fraction allowed (`0.5`): the age is measured in microseconds.
    max_observation_age_s: (
        Annotated[int, _range_of("max_observation_age_s")]
        | Annotated[float, _range_of("max_observation_age_s")]
    )
    cooldown_base_s: Annotated[int, _range_of("cooldown_base_s")]
    cooldown_max_s: Annotated[int, _range_of("cooldown_max_s")]
    limits: dict[LimitDimension, DimensionLimit] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = token_config_problems(self)
        if problems:
            raise ValueError("; ".join(problems))


# The config fields by gate, in declaration order (`flatten` flattens them).
CASE_FIELDS: tuple[str, ...] = CaseConfig.__struct_fields__
TOKEN_FIELDS: tuple[str, ...] = tuple(f for f in TokenConfig.__struct_fields__ if f != "limits")
LIMIT_PARTS: tuple[str, ...] = DimensionLimit.__struct_fields__
"""A dimension's fields under `limits`; `configure` takes them as `--{part}-{dimension}`."""

# The range tables name exactly the configs' fields, in their order.
assert tuple(CONFIG_RANGES) == CASE_FIELDS + TOKEN_FIELDS
assert tuple(LIMIT_RANGES) == LIMIT_PARTS
assert TOKEN_FIELDS[:2] == ("quota_tpm", "target_tpm")


def _range_problem(
    name: str,
    value: Number,
    field: str | None = None,
    ranges: dict[str, Range] = CONFIG_RANGES,
) -> list[str]:
    """The problem of a value outside its field's range (`field`, or `name` itself)."""
    low, high = ranges[name if field is None else field]
    if isinstance(value, bool) or not low <= value <= high:
        return [f"{name} must be from {low} to {high}, got {value}"]
    return []


def case_config_problems(c: CaseConfig) -> list[str]:
    """Every rule of SPEC §3.1 the case config breaks (empty when valid)."""
    problems = [p for name in CASE_FIELDS for p in _range_problem(name, getattr(c, name))]
    if problems:
        return problems
    return _broken_rules(
        ("target_active_cases", c.target_active_cases, "max_active_cases", c.max_active_cases),
        ("max_baseline_cases", c.max_baseline_cases, "max_active_cases", c.max_active_cases),
        ("max_test_cases", c.max_test_cases, "max_active_cases", c.max_active_cases),
        ("reserved_test_cases", c.reserved_test_cases, "max_test_cases", c.max_test_cases),
        ("reserved_test_cases", c.reserved_test_cases, "max_active_cases", c.max_active_cases),
        (
            "target_active_cases",
            c.target_active_cases,
            "max_baseline_cases + max_test_cases",
            c.max_baseline_cases + c.max_test_cases,
        ),
    )


def token_config_problems(t: TokenConfig) -> list[str]:
    """Every rule of SPEC §3.1 and §3.6 the token config breaks (empty when valid)."""
    problems: list[str] = []
    if t.quota_tpm is None:
        if not t.limits:
            problems.append("the token gate needs quota_tpm or another dimension's quota")
        if t.target_tpm is not None:
            problems.append("target_tpm needs quota_tpm")
        if t.evaluator_reserve_tpm or t.cold_start_reserve_tpm:
            problems.append("evaluator_reserve_tpm and cold_start_reserve_tpm need quota_tpm")
    else:
        problems += _range_problem("quota_tpm", t.quota_tpm)
        if t.target_tpm is None:
            problems.append("target_tpm is required with quota_tpm")
        else:
            problems += _range_problem("target_tpm", t.target_tpm)
    for name in TOKEN_FIELDS[2:]:  # the fields after quota_tpm and target_tpm
        problems += _range_problem(name, getattr(t, name))
    for dimension, limit in t.limits.items():
        problems += dimension_limit_problems(dimension, limit)
    if problems or t.quota_tpm is None or t.target_tpm is None:
        return problems
    return _broken_rules(
        ("target_tpm", t.target_tpm, "quota_tpm", t.quota_tpm),
        (
            "evaluator_reserve_tpm + cold_start_reserve_tpm",
            t.evaluator_reserve_tpm + t.cold_start_reserve_tpm,
            "target_tpm",
            t.target_tpm,
        ),
    )


def dimension_limit_problems(dimension: str, d: DimensionLimit) -> list[str]:
    """Every rule of SPEC §3.6 one dimension's limit breaks, named by its config fields."""

    def name(field: str) -> str:
        return f"{field}_{dimension}"

    problems = [
        p
        for field in LIMIT_PARTS
        for p in _range_problem(name(field), getattr(d, field), field, LIMIT_RANGES)
    ]
    if problems:
        return problems
    return _broken_rules(
        (name("target"), d.target, name("quota"), d.quota),
        (
            f"{name('evaluator_reserve')} + {name('cold_start_reserve')}",
            d.evaluator_reserve + d.cold_start_reserve,
            name("target"),
            d.target,
        ),
    )


def _broken_rules(*rules: tuple[str, int, str, int]) -> list[str]:
    """Messages for every `left <= right` rule that does not hold."""
    return [
        f"{left} ({lvalue}) must be <= {right} ({rvalue})"
        for left, lvalue, right, rvalue in rules
        if lvalue > rvalue
    ]


def default_target_tpm(quota_tpm: int) -> int:
    """SPEC §3.1: the target defaults to 90% of the quota (rounded down)."""
    numerator, denominator = DEFAULT_TARGET_FRACTION
    return quota_tpm * numerator // denominator


# -- how configure changes a config (SPEC §3.5) ---------------------------------------


def dimension_fields(dimension: str) -> tuple[str, str, str, str]:
    """quota, target, evaluator reserve, cold start reserve of one dimension."""
    quota, target, evaluator, cold = (f"{part}_{dimension}" for part in LIMIT_PARTS)
    return quota, target, evaluator, cold


LIMIT_FIELDS: tuple[str, ...] = tuple(
    name for dimension in LIMIT_DIMENSIONS for name in dimension_fields(dimension)
)
GENERAL_TOKEN_FIELDS: tuple[str, ...] = tuple(
    f for f in TOKEN_FIELDS if f not in dimension_fields("tpm")
)
"""Token-gate fields of no one dimension (weight, observation age, cooldowns)."""
FIELDS: tuple[str, ...] = CASE_FIELDS + TOKEN_FIELDS + LIMIT_FIELDS
"""Every config field, in the order `configure --help`, `explicit` and `changes` use."""
GATES: dict[str, tuple[str, ...]] = {
    "cases": CASE_FIELDS,
    "tokens": TOKEN_FIELDS + LIMIT_FIELDS,
}
FLOAT_FIELDS = frozenset({"cached_input_weight"})
FRACTIONAL_FIELDS = frozenset(
    name
    for name, hint in get_type_hints(TokenConfig).items()
    if {int, float} <= {get_origin(arm) or arm for arm in get_args(hint)}
)
"""Numbers kept whole when whole and fractional when not (`max_observation_age_s`)."""

DERIVED: dict[str, tuple[str, ...]] = {
    "target_active_cases": ("max_active_cases",),
    "max_test_cases": ("max_active_cases",),
    "max_baseline_cases": ("max_active_cases", "reserved_test_cases"),
    **{dimension_fields(d)[1]: (dimension_fields(d)[0],) for d in DIMENSIONS},
}
"""Each derived default and the fields it follows."""

DEFAULTS: dict[str, Any] = {
    "reserved_test_cases": 0,
    "cached_input_weight": 1.0,
    "max_observation_age_s": DEFAULT_MAX_OBSERVATION_AGE_S,
    "cooldown_base_s": DEFAULT_COOLDOWN_BASE_S,
    "cooldown_max_s": DEFAULT_COOLDOWN_MAX_S,
    **{dimension_fields(d)[2]: 0 for d in DIMENSIONS},
    **{dimension_fields(d)[3]: 0 for d in DIMENSIONS},
}
"""Plain defaults of the fields a new gate or dimension starts with when not given."""

Flat = dict[str, Any]


def derived_value(name: str, flat: Mapping[str, Any]) -> Any:
    """The default of derived field `name` from its sources' values in `flat`."""
    if name in ("target_active_cases", "max_test_cases"):
        return flat["max_active_cases"]
    if name == "max_baseline_cases":
        return max(0, flat["max_active_cases"] - (flat["reserved_test_cases"] or 0))
    quota = flat[DERIVED[name][0]]
    return None if quota is None else default_target_tpm(quota)


class Config(msgspec.Struct, frozen=True):
    """A goal's whole capacity config and which of its fields were set explicitly."""

    cases: CaseConfig | None = None
    tokens: TokenConfig | None = None
    explicit: tuple[str, ...] = ()

    def flat(self) -> Flat:
        return flatten(self.cases, self.tokens)


def flatten(cases: CaseConfig | None, tokens: TokenConfig | None) -> Flat:
    """One value per field name; None where the gate or dimension is not configured."""
    flat: Flat = dict.fromkeys(FIELDS)
    if cases is not None:
        flat.update(msgspec.structs.asdict(cases))
    if tokens is not None:
        values = msgspec.structs.asdict(tokens)
        limits = values.pop("limits")
        flat.update(values)
        if tokens.quota_tpm is None:  # no tpm dimension: its reserves are not configured
            flat.update(dict.fromkeys(dimension_fields("tpm")))
        for dimension, limit in limits.items():
            flat.update(
                zip(dimension_fields(dimension), msgspec.structs.astuple(limit), strict=True)
            )
    return flat


def effective_explicit(config: Config) -> set[str]:
    """The recorded `explicit`, plus every derived field whose value is not what its
    derivation gives (a config written before `explicit` was recorded: such a value
    can only have been given)."""
    flat = config.flat()
    found = set(config.explicit)
    for name in DERIVED:
        if flat[name] is not None and flat[name] != derived_value(name, flat):
            found.add(name)
    return found


_FIELD_NAME = re.compile(
    r"(?<![\w-])(" + "|".join(sorted(FIELDS, key=len, reverse=True)) + r"|remove_gate)(?!\w)"
)
"""A config field named in a message (as the engine names it: `target_tpm`)."""


def _invalid(
    message: str | Callable[[str], str],
    problems: list[str] | None = None,
    *,
    about: str | None = None,
) -> InvalidInput:
    """`message`: text naming config fields as the engine does (each caller words them
    its own way: the CLI by their flags), or a function of the caller's word for the
    field `about`. `problems` (the JSON's) keep the engine's names."""
    if isinstance(message, str) and about is None:
        named = tuple(found.group() for found in _FIELD_NAME.finditer(message))
        if named:
            text = message
            error = InvalidInput(
                lambda names: _FIELD_NAME.sub(lambda found: names(found.group()), text),
                code=codes.INVALID_CONFIG,
                about=named,
            )
            error.context["problems"] = problems if problems is not None else [text]
            return error
    error = InvalidInput(message, code=codes.INVALID_CONFIG, about=about)
    error.context["problems"] = problems if problems is not None else [error.message]
    return error


def _not_one_of(field: str, choices: str, value: str) -> InvalidInput:
    return _invalid(lambda name: f"{name} takes {choices}, got {value!r}", about=field)


def given_fields(fields: Mapping[str, Any]) -> Flat:
    """The fields given (None dropped); an unknown name is a caller's typo."""
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise TypeError(f"unknown config fields: {unknown}")
    given = {name: value for name, value in fields.items() if value is not None}
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _invalid(f"{name} must be a number, got {value!r}")
        if isinstance(value, float) and name not in FLOAT_FIELDS:
            if value.is_integer():
                given[name] = int(value)
            elif name not in FRACTIONAL_FIELDS:
                raise _invalid(f"{name} must be an integer, got {value}")
        if name in FLOAT_FIELDS:
            given[name] = float(value)
    return given


def reconfigure(
    current: Config,
    fields: Mapping[str, Any],
    *,
    remove_limits: Iterable[str] = (),
    remove_gates: Iterable[str] = (),
) -> Config:
    """The config after a configure given `fields` (SPEC §3.5); exit 2 if invalid."""
    given = given_fields(fields)
    removed: set[str] = set()
    for gate in remove_gates:
        if gate not in GATES:
            raise _not_one_of("remove_gate", "cases or tokens", gate)
        removed.update(GATES[gate])
    for dimension in remove_limits:
        if dimension not in DIMENSIONS:
            raise _not_one_of("remove_limit", ", ".join(DIMENSIONS), dimension)
        removed.update(dimension_fields(dimension))
    clash = [name for name in given if name in removed]
    if clash:
        raise _invalid(f"{', '.join(clash)} given for a gate or dimension being removed")
    flat = current.flat()
    explicit = effective_explicit(current)
    for name in removed:
        flat[name] = None
    explicit -= removed
    flat.update(given)
    explicit |= set(given)
    removing_tokens = "tokens" in set(remove_gates)
    return _build(
        flat, explicit, given, keep_token_gate=current.tokens is not None and not removing_tokens
    )


def _build(flat: Flat, explicit: set[str], given: Flat, *, keep_token_gate: bool) -> Config:
    """Fill defaults, re-derive what follows its source, check, and make the structs."""
    _clear_unconfigured_cases(flat, given)
    for dimension in DIMENSIONS:
        _clear_unconfigured_dimension(flat, given, dimension)
    token_gate = any(flat[dimension_fields(d)[0]] is not None for d in DIMENSIONS)
    if not token_gate:
        _clear_token_gate(flat, given, keep_token_gate=keep_token_gate)
    # -- defaults, then the derived defaults that follow their source
    present = _present_fields(flat, token_gate)
    for name in present:
        if flat[name] is None and name in DEFAULTS:
            flat[name] = DEFAULTS[name]
    for name in DERIVED:
        if name in present and name not in explicit:
            flat[name] = derived_value(name, flat)
    explicit &= set(present)
    return Config(*_structs(flat, token_gate), tuple(n for n in FIELDS if n in explicit))


def _clear_unconfigured_cases(flat: Flat, given: Flat) -> None:
    """Without --max-active-cases there is no case gate: its other fields go too, and
    naming one of them is an error."""
    if flat["max_active_cases"] is None:
        named = [n for n in CASE_FIELDS if n in given]
        if named:
            raise _invalid("the case gate needs max_active_cases (it is not configured)")
        flat.update(dict.fromkeys(CASE_FIELDS))


def _clear_unconfigured_dimension(flat: Flat, given: Flat, dimension: str) -> None:
    """Likewise a token dimension without its quota."""
    quota, *rest = dimension_fields(dimension)
    if flat[quota] is None:
        named = [n for n in rest if n in given]
        if named:
            raise _invalid(
                f"{', '.join(named)} needs {quota} (dimension {dimension} is not configured)"
            )
        flat.update(dict.fromkeys(rest))


def _clear_token_gate(flat: Flat, given: Flat, *, keep_token_gate: bool) -> None:
    """No dimension has a quota: the token gate's general fields go too."""
    named = [n for n in GENERAL_TOKEN_FIELDS if n in given]
    if named:
        raise _invalid(
            "the token gate needs quota_tpm or a quota of another dimension "
            "(quota_itpm, quota_otpm, quota_rpm, quota_tpd, quota_rpd)"
        )
    if keep_token_gate:  # its last dimension removed: say how to remove the gate
        raise _invalid(
            "the token gate needs at least one dimension: use remove_gate=tokens to remove the gate"
        )
    flat.update(dict.fromkeys(GENERAL_TOKEN_FIELDS))


def _present_fields(flat: Flat, token_gate: bool) -> list[str]:
    """The fields the new config holds (its gates and dimensions)."""
    present: list[str] = []
    if flat["max_active_cases"] is not None:
        present += CASE_FIELDS
    if token_gate:
        present += GENERAL_TOKEN_FIELDS
        for dimension in DIMENSIONS:
            names = dimension_fields(dimension)
            if flat[names[0]] is not None:
                present += names
    return [n for n in FIELDS if n in present]


def _structs(flat: Flat, token_gate: bool) -> tuple[CaseConfig | None, TokenConfig | None]:
    cases = tokens = None
    problems: list[str] = []
    if flat["max_active_cases"] is not None:
        case_values = {n: flat[n] for n in CASE_FIELDS}
        cases, found = _made(CaseConfig, case_values)
        problems += found
    if token_gate:
        values: dict[str, Any] = {n: flat[n] for n in TOKEN_FIELDS}
        if flat["quota_tpm"] is None:
            values.update({"evaluator_reserve_tpm": 0, "cold_start_reserve_tpm": 0})
        limits: dict[str, Any] = {}
        for dimension in LIMIT_DIMENSIONS:
            names = dimension_fields(dimension)
            if flat[names[0]] is not None:
                parts = dict(zip(LIMIT_PARTS, (flat[n] for n in names), strict=True))
                limits[dimension] = DimensionLimit(**parts)
        tokens, found = _made(TokenConfig, {**values, "limits": limits})
        problems += found
    if problems:
        raise _invalid("invalid capacity config: " + "; ".join(problems), problems)
    return cases, tokens


def _made(kind: type[Any], values: dict[str, Any]) -> tuple[Any, list[str]]:
    """The config Struct, or every rule the values break: ranges and relations with the
    messages of `case_config_problems`/`token_config_problems` (raised by the Struct's
    __post_init__), then anything msgspec's own constraints refuse."""
    try:
        made = kind(**values)
        msgspec.json.decode(msgspec.json.encode(made), type=kind)
    except ValueError as exc:  # msgspec.ValidationError is one too
        return None, str(exc).split("; ")
    return made, []


def changes(old: Config, new: Config) -> dict[str, list[Any]]:
    """Every field whose value changed: {field: [old, new]} (None: not configured)."""
    before, after = old.flat(), new.flat()
    return {n: [before[n], after[n]] for n in FIELDS if before[n] != after[n]}
