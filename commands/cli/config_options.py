"""The capacity config flags that `configure` and `whatif` both take (SPEC §3.5, §7).

    @commands("configure", example=...)
    @config_options(show_defaults=True)
    def configure(ctx: Ctx, goal: GoalOpt, config: ConfigOptions, at: AtOpt = None) -> Output:
        ... decode(ConfigureRequest, {"goal": goal, "at": at, **config}, CLI) ...

The decorator puts the config options where the `config` parameter stands and hands
them to the command gathered in that one dict, so both commands declare the same
flags, with the same help, from this one table. The fields and their types are the
requests' (`usecases.configfields.ConfigFieldsRequest`).
"""

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_type_hints

import typer

from quotaledger.cli.common import duration_option
from quotaledger.projections.capacity import CONFIG_RANGES, DEFAULTS, FIELDS, dimension_fields
from quotaledger.usecases.configfields import ConfigFieldsRequest

ConfigOptions = dict[str, Any]
"""The config options a command was given, by field name (None: not given)."""


# field -> (help, what `configure` does when the flag is absent). `whatif` leaves the
# second part out: there an absent flag keeps the recorded value instead.
def _range(name: str) -> str:
    low, high = CONFIG_RANGES[name]
    return f"{low}-{high}"


_HELP: dict[str, tuple[str, str]] = {
    "max_active_cases": (f"Case gate: runs active at most ({_range('max_active_cases')})", ""),
    "target_active_cases": ("Case gate: runs to keep active", "[default: max]"),
    "max_baseline_cases": ("Case gate: baseline runs at most", "[default: max - reserved]"),
    "max_test_cases": ("Case gate: control/treatment/explore runs at most", "[default: max]"),
    "reserved_test_cases": ("Case gate: slots baselines leave to test arms", "[default: 0]"),
    "quota_tpm": ("Token gate: the provider's TPM quota", ""),
    "target_tpm": ("Token gate: TPM to fill", "[default: 90% of quota]"),
    "evaluator_reserve_tpm": ("Token gate: TPM solvers leave to evaluators", "[default: 0]"),
    "cold_start_reserve_tpm": ("Token gate: TPM kept free for start-up bursts", "[default: 0]"),
    "cached_input_weight": (
        f"Token gate: how much a cached input token counts, {_range('cached_input_weight')}",
        f"[default: {DEFAULTS['cached_input_weight']}]",
    ),
    "max_observation_age_s": (
        "Token gate: usage observations stay fresh this long",
        f"[{DEFAULTS['max_observation_age_s']}]",
    ),
    "cooldown_base_s": (
        "Token gate: first cooldown after a 429, doubling",
        f"[{DEFAULTS['cooldown_base_s']}]",
    ),
    "cooldown_max_s": (
        "Token gate: longest cooldown, Retry-After included",
        f"[{DEFAULTS['cooldown_max_s']}]",
    ),
}
for _dimension, _what in (
    ("itpm", "input tokens per minute"),
    ("otpm", "output tokens per minute"),
    ("rpm", "requests per minute"),
    ("tpd", "tokens per day"),
    ("rpd", "requests per day"),
):
    _quota, _target, _evaluator, _cold = dimension_fields(_dimension)
    _HELP[_quota] = (f"Token gate: the provider's quota of {_what}", "")
    _HELP[_target] = (f"Token gate: {_what} to fill", "[default: 90% of quota]")
    _HELP[_evaluator] = (f"Token gate: {_what} solvers leave to evaluators", "[default: 0]")
    _HELP[_cold] = (f"Token gate: {_what} kept free for start-up bursts", "[default: 0]")
_FIELDS = FIELDS
assert tuple(_HELP) == _FIELDS
_TYPES = get_type_hints(ConfigFieldsRequest)  # int | None, or float | None


def _option(name: str, kind: Any, show_defaults: bool) -> inspect.Parameter:
    text, default_text = _HELP[name]
    help_text = f"{text} {default_text}." if show_defaults and default_text else f"{text}."
    flag = "--" + name.replace("_", "-")
    kind_of_value = _TYPES[name]
    if name.endswith("_s"):  # seconds: a duration such as 90s or 5m also does (SPEC §8)
        whole = float not in get_args(kind_of_value)  # the request type: a fraction?
        option = duration_option(flag, help_text, whole=whole)
        kind_of_value = int | None if whole else float | None  # typer takes no int | float
    else:
        option = typer.Option(flag, help=help_text, show_default=False)
    annotation = Annotated[kind_of_value, option]  # type: ignore[valid-type]
    return inspect.Parameter(name, kind, default=None, annotation=annotation)


def config_options(*, show_defaults: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Replace the command's `config` parameter with the config options."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(func)
        params: list[inspect.Parameter] = []
        for param in signature.parameters.values():
            if param.name == "config":
                params += [_option(name, param.kind, show_defaults) for name in _FIELDS]
            else:
                params.append(param)

        @functools.wraps(func)
        def gathered(*args: Any, **kwargs: Any) -> Any:
            config = {name: kwargs.pop(name) for name in _FIELDS}
            return func(*args, config=config, **kwargs)

        del gathered.__wrapped__  # `command` and typer must see the new signature
        gathered.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        return gathered

    return decorate


# The spend caps (SPEC §12.4): configure sets them, whatif replays them.
CapTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--cap-tokens",
        help="Spend cap: tokens (summed as TPM is) from --cap-since.",
        show_default=False,
    ),
]
CapUsdOpt = Annotated[
    float | None,
    typer.Option(
        "--cap-usd",
        help="Spend cap: US dollars (at most 6 decimals) from --cap-since, at the prices set.",
        show_default=False,
    ),
]
