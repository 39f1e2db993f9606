"""How `pool configure` changes a pool's config (SPEC §12.1), by `configure`'s rule:
only what is given changes; a target never set explicitly follows its quota (90%);
`explicit` names every field set explicitly and not since removed; `--remove-limit D`
removes a dimension. The config is handled flat, one value per field name as `pool
configure` takes it (`quota_tpm`, `target_rpd`, `cached_input_weight`, ...)."""

from collections.abc import Iterable, Mapping
from typing import Any

from quotaledger.journal import InvalidInput, codes
from quotaledger.projections.capacity.config import (
    CONFIG_RANGES,
    DEFAULTS,
    DIMENSIONS,
    LIMIT_RANGES,
    default_target_tpm,
)
from quotaledger.projections.capacity.pool_events import PoolConfigured, PoolLimit

GENERAL_FIELDS = ("cached_input_weight", "cooldown_base_s", "cooldown_max_s")


def quota_field(dimension: str) -> str:
    return f"quota_{dimension}"


def target_field(dimension: str) -> str:
    return f"target_{dimension}"


POOL_FIELDS: tuple[str, ...] = (
    *(name for d in DIMENSIONS for name in (quota_field(d), target_field(d))),
    *GENERAL_FIELDS,
)
"""Every field `pool configure` takes, in the order `explicit` and `changes` use."""

PoolFlat = dict[str, Any]


def pool_flat(config: PoolConfigured | None) -> PoolFlat:
    """One value per field; None where a dimension is not configured (or no config)."""
    flat: PoolFlat = dict.fromkeys(POOL_FIELDS)
    if config is None:
        return flat
    for dimension, limit in config.limits.items():
        flat[quota_field(dimension)] = limit.quota
        flat[target_field(dimension)] = limit.target
    for name in GENERAL_FIELDS:
        flat[name] = getattr(config, name)
    return flat


def _invalid(field: str, text: str) -> InvalidInput:
    error = InvalidInput(lambda name: f"{name} {text}", code=codes.INVALID_CONFIG, about=field)
    error.context["problems"] = [f"{field} {text}"]
    return error


def _check_range(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _invalid(name, f"must be from {low} to {high}, got {value!r}")


def checked_given(fields: Mapping[str, Any]) -> PoolFlat:
    """The fields given (None dropped), each a number in its range."""
    unknown = sorted(set(fields) - set(POOL_FIELDS))
    if unknown:
        raise TypeError(f"unknown pool fields: {unknown}")
    given: PoolFlat = {}
    for name, value in fields.items():
        if value is None:
            continue
        if name == "cached_input_weight":
            _check_range(name, value, *CONFIG_RANGES[name])
            given[name] = float(value)
            continue
        if isinstance(value, float):
            if not value.is_integer():
                raise _invalid(name, f"must be an integer, got {value}")
            value = int(value)
        if name in CONFIG_RANGES:
            _check_range(name, value, *CONFIG_RANGES[name])
        else:
            _check_range(name, value, *LIMIT_RANGES[name.split("_", 1)[0]])
        given[name] = value
    return given


def pool_reconfigure(  # noqa: C901
    current: PoolConfigured | None,
    fields: Mapping[str, Any],
    *,
    remove_limits: Iterable[str] = (),
) -> tuple[PoolFlat, list[str]]:
    """The flat config and `explicit` after a `pool configure` given `fields`; exit 2
    (`invalid_config`) if the result breaks a rule."""
    given = checked_given(fields)
    flat = pool_flat(current)
    explicit = set(current.explicit) if current is not None else set()
    for dimension in remove_limits:
        if dimension not in DIMENSIONS:
            raise _invalid("remove_limit", f"takes {', '.join(DIMENSIONS)}, got {dimension!r}")
        removed = {quota_field(dimension), target_field(dimension)}
        clash = sorted(removed & set(given))
        if clash:
            raise _invalid(clash[0], "is given for a dimension being removed")
        for name in removed:
            flat[name] = None
        explicit -= removed
    flat.update(given)
    explicit |= set(given)
    for dimension in DIMENSIONS:
        quota, target = quota_field(dimension), target_field(dimension)
        if flat[quota] is None:
            if flat[target] is not None:
                raise _invalid(target, f"needs {quota}")
            continue
        if target not in explicit:
            flat[target] = default_target_tpm(flat[quota])
        if flat[target] > flat[quota]:
            raise _invalid(target, f"({flat[target]}) must be <= {quota} ({flat[quota]})")
    for name in GENERAL_FIELDS:
        if flat[name] is None:
            flat[name] = DEFAULTS[name]
    return flat, [name for name in POOL_FIELDS if name in explicit]


def pool_config_of(flat: PoolFlat, explicit: list[str], caps: Mapping[str, Any]) -> PoolConfigured:
    """The `pool.configured` payload of a flat config, its `explicit` and its caps."""
    limits = {
        dimension: PoolLimit(
            quota=flat[quota_field(dimension)], target=flat[target_field(dimension)]
        )
        for dimension in DIMENSIONS
        if flat[quota_field(dimension)] is not None
    }
    return PoolConfigured(
        limits=limits,
        cached_input_weight=flat["cached_input_weight"],
        cooldown_base_s=flat["cooldown_base_s"],
        cooldown_max_s=flat["cooldown_max_s"],
        cap_tokens=caps.get("cap_tokens"),
        cap_usd=caps.get("cap_usd"),
        cap_since=caps.get("cap_since"),
        explicit=explicit,
        cap_counted=caps.get("cap_counted"),
        cap_total=caps.get("cap_total"),
    )
