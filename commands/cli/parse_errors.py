"""The option parser's errors as every other error (SPEC §8): one line, one code.

click reports a missing option, an unknown one, an extra argument or a value it cannot
convert (`--forecast-tpm nan`, `QUOTALEDGER_JSON=2`) as a usage block with no code.
`parser_error` turns each into an `InvalidInput`: what does not parse at all is
`usage`; a value of the wrong kind gets the code its option gives every bad value,
the one its request field's rule raises (`--forecast-tpm 1.5` is
`invalid_token_count`, as `-1` is), so a caller sees one code per option whatever
way the value is bad.
"""

from __future__ import annotations

import click

from quotaledger.journal import codes
from quotaledger.journal.errors import Error, InvalidInput
from quotaledger.usecases.configfields import ConfigFieldsRequest
from quotaledger.usecases.decode import CLI, Names, field_rule
from quotaledger.usecases.registry import USE_CASES

COMMON_OPTION_CODES = {"json_": codes.INVALID_OPTION, "journal": codes.INVALID_OPTION}
"""The options every command has, which no request declares."""


def parser_error(error: click.UsageError) -> InvalidInput:
    """`error` as one line with its code."""
    message = " ".join(error.format_message().split())
    command = error.ctx.command_path if error.ctx is not None else "quotaledger"
    if isinstance(error, click.BadParameter) and not isinstance(error, click.MissingParameter):
        param = error.param
        name = param.name if param is not None else None
        code = option_code(command, name, getattr(error, "code", None))
        option = param.opts[0] if isinstance(param, click.Option) else None
        context = {} if option is None else {"option": option}
        named = getattr(error, "error", None)  # an error that names the option itself
        if isinstance(named, Error) and param is not None:
            message = named.worded(_name_of(error.ctx, param))
        return InvalidInput(message, code=code, **context)
    # Nothing parsed: a missing or unknown option, a missing value, an extra argument.
    return InvalidInput(message, code=codes.USAGE)


def _name_of(ctx: click.Context | None, param: click.Parameter) -> Names:
    """The user's word for `param`: the environment variable that gave its value,
    else its flag."""
    from_env = (
        ctx is not None
        and param.name is not None
        and (ctx.get_parameter_source(param.name) is click.core.ParameterSource.ENVIRONMENT)
    )
    if from_env and isinstance(param, click.Option) and isinstance(param.envvar, str):
        envvar = param.envvar
        return lambda field: envvar
    return CLI


def option_code(command_path: str, name: str | None, parsed: str | None) -> str:
    """The one code of option `name` of the command `command_path` names: its request
    field's (the config fields': `invalid_config`), else the code its own parser gave
    (`parsed`: a duration's `invalid_duration`), else `invalid_option`."""
    if name is None:
        return parsed or codes.INVALID_OPTION
    if name in COMMON_OPTION_CODES:
        return parsed or COMMON_OPTION_CODES[name]
    words = command_path.split()[1:]
    use_case = USE_CASES.get("_".join(words)) or USE_CASES.get("_".join(words) + "_")
    if use_case is not None:
        request_type = use_case.request_type()
        if issubclass(request_type, ConfigFieldsRequest) and name in (
            ConfigFieldsRequest.__struct_fields__
        ):
            return codes.INVALID_CONFIG
        rule = field_rule(request_type, name)
        if rule is not None:
            return rule.code
    return parsed or codes.INVALID_OPTION


__all__ = ["option_code", "parser_error"]
