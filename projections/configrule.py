"""How a configure (or a what-if) changes a goal's capacity config (SPEC §3.5, §3.6).

`configure` changes only what it is given. Every field not given keeps its current
value, except a derived default that was never set explicitly, which follows its
source:

    target_tpm          <- quota_tpm           (90%)
    target_D            <- quota_D             (90%, for D in itpm, otpm, rpm)
    target_active_cases <- max_active_cases
    max_test_cases      <- max_active_cases
    max_baseline_cases  <- max_active_cases - reserved_test_cases

The config is handled flat, one value per field name as `configure` takes it
(`quota_tpm`, `quota_itpm`, `target_active_cases`, ...; None where a gate or a
dimension is not configured), so one rule serves every field, `explicit` and
`changes` name fields the way a user types them, and `whatif` applies its overrides
by the very same function.
"""

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from quotaledger.journal import InvalidInput, codes
from quotaledger.projections import capacity as cap
from quotaledger.projections.configfields import ConfigFields


def dimension_fields(dimension: str) -> tuple[str, str, str, str]:
    """quota, target, evaluator reserve, cold start reserve of one dimension."""
    quota, target, evaluator, cold = (f"{part}_{dimension}" for part in cap.LIMIT_PARTS)
    return quota, target, evaluator, cold


LIMIT_FIELDS: tuple[str, ...] = tuple(
    name for dimension in cap.LIMIT_DIMENSIONS for name in dimension_fields(dimension)
)
GENERAL_TOKEN_FIELDS: tuple[str, ...] = tuple(
    f for f in cap.TOKEN_FIELDS if f not in dimension_fields("tpm")
)
"""Token-gate fields of no one dimension (weight, observation age, cooldowns)."""
FIELDS: tuple[str, ...] = cap.CASE_FIELDS + cap.TOKEN_FIELDS + LIMIT_FIELDS
"""Every config field, in the order `configure --help`, `explicit` and `changes` use."""
GATES: dict[str, tuple[str, ...]] = {
    "cases": cap.CASE_FIELDS,
    "tokens": cap.TOKEN_FIELDS + LIMIT_FIELDS,
}
FLOAT_FIELDS = frozenset({"cached_input_weight"})

# The typed keyword arguments must name exactly the configs' fields.
assert tuple(ConfigFields.__annotations__) == FIELDS

DERIVED: dict[str, tuple[str, ...]] = {
    "target_active_cases": ("max_active_cases",),
    "max_test_cases": ("max_active_cases",),
    "max_baseline_cases": ("max_active_cases", "reserved_test_cases"),
    **{dimension_fields(d)[1]: (dimension_fields(d)[0],) for d in cap.DIMENSIONS},
}
"""Each derived default and the fields it follows."""

DEFAULTS: dict[str, Any] = {
    "reserved_test_cases": 0,
    "cached_input_weight": 1.0,
    "max_observation_age_s": cap.DEFAULT_MAX_OBSERVATION_AGE_S,
    "cooldown_base_s": cap.DEFAULT_COOLDOWN_BASE_S,
    "cooldown_max_s": cap.DEFAULT_COOLDOWN_MAX_S,
    **{dimension_fields(d)[2]: 0 for d in cap.DIMENSIONS},
    **{dimension_fields(d)[3]: 0 for d in cap.DIMENSIONS},
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
    return None if quota is None else cap.default_target_tpm(quota)


class Config(msgspec.Struct, frozen=True):
    """A goal's whole capacity config and which of its fields were set explicitly."""

    cases: cap.CaseConfig | None = None
    tokens: cap.TokenConfig | None = None
    explicit: tuple[str, ...] = ()

    def flat(self) -> Flat:
        return flatten(self.cases, self.tokens)


def flatten(cases: cap.CaseConfig | None, tokens: cap.TokenConfig | None) -> Flat:
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


def _invalid(message: str, problems: list[str] | None = None) -> InvalidInput:
    problems = problems if problems is not None else [message]
    return InvalidInput(message, code=codes.INVALID_CONFIG, problems=problems)


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
            if not value.is_integer():
                raise _invalid(f"{name} must be an integer, got {value}")
            given[name] = int(value)
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
            raise _invalid(f"--remove-gate takes cases or tokens, got {gate!r}")
        removed.update(GATES[gate])
    for dimension in remove_limits:
        if dimension not in cap.DIMENSIONS:
            raise _invalid(f"--remove-limit takes {', '.join(cap.DIMENSIONS)}, got {dimension!r}")
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
    for dimension in cap.DIMENSIONS:
        _clear_unconfigured_dimension(flat, given, dimension)
    token_gate = any(flat[dimension_fields(d)[0]] is not None for d in cap.DIMENSIONS)
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
        named = [n for n in cap.CASE_FIELDS if n in given]
        if named:
            raise _invalid("the case gate needs --max-active-cases (it is not configured)")
        flat.update(dict.fromkeys(cap.CASE_FIELDS))


def _clear_unconfigured_dimension(flat: Flat, given: Flat, dimension: str) -> None:
    """Likewise a token dimension without its quota."""
    quota, *rest = dimension_fields(dimension)
    if flat[quota] is None:
        named = [n for n in rest if n in given]
        if named:
            raise _invalid(
                f"{', '.join(named)} needs --{quota.replace('_', '-')} "
                f"(dimension {dimension} is not configured)"
            )
        flat.update(dict.fromkeys(rest))


def _clear_token_gate(flat: Flat, given: Flat, *, keep_token_gate: bool) -> None:
    """No dimension has a quota: the token gate's general fields go too."""
    named = [n for n in GENERAL_TOKEN_FIELDS if n in given]
    if named:
        raise _invalid(
            "the token gate needs --quota-tpm or a quota of another dimension "
            "(--quota-itpm, --quota-otpm, --quota-rpm)"
        )
    if keep_token_gate:  # its last dimension removed: say how to remove the gate
        raise _invalid(
            "the token gate needs at least one dimension: use --remove-gate tokens to "
            "remove the gate"
        )
    flat.update(dict.fromkeys(GENERAL_TOKEN_FIELDS))


def _present_fields(flat: Flat, token_gate: bool) -> list[str]:
    """The fields the new config holds (its gates and dimensions)."""
    present: list[str] = []
    if flat["max_active_cases"] is not None:
        present += cap.CASE_FIELDS
    if token_gate:
        present += GENERAL_TOKEN_FIELDS
        for dimension in cap.DIMENSIONS:
            names = dimension_fields(dimension)
            if flat[names[0]] is not None:
                present += names
    return [n for n in FIELDS if n in present]


def _structs(flat: Flat, token_gate: bool) -> tuple[cap.CaseConfig | None, cap.TokenConfig | None]:
    cases = tokens = None
    problems: list[str] = []
    if flat["max_active_cases"] is not None:
        case_values = {n: flat[n] for n in cap.CASE_FIELDS}
        cases, found = _made(cap.CaseConfig, case_values)
        problems += found
    if token_gate:
        values: dict[str, Any] = {n: flat[n] for n in cap.TOKEN_FIELDS}
        if flat["quota_tpm"] is None:
            values.update({"evaluator_reserve_tpm": 0, "cold_start_reserve_tpm": 0})
        limits: dict[str, Any] = {}
        for dimension in cap.LIMIT_DIMENSIONS:
            names = dimension_fields(dimension)
            if flat[names[0]] is not None:
                parts = dict(zip(cap.LIMIT_PARTS, (flat[n] for n in names), strict=True))
                limits[dimension] = cap.DimensionLimit(**parts)
        tokens, found = _made(cap.TokenConfig, {**values, "limits": limits})
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
