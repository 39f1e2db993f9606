"""A runner's per-event commands (SPEC §3.5), observe, admit, reject and release:
what each does with its options, and the text it prints, without typer or click.

The typer commands (cli/runner.py) run them, and so does a per-event call read by the
generated grammar (quotaledger.lean.local), which SPEC §9's start-up figure measures:
each takes the context and its options by parameter name, as click gives them.
"""

from typing import Any

from quotaledger.console.context import Ctx, request_of
from quotaledger.console.inputs import check_observe_counts, read_input
from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.limits import WAIT_S_DEFAULT
from quotaledger.render.answers import output_of
from quotaledger.render.output import Output
from quotaledger.services.capacity import CapacityService
from quotaledger.usecases.capacity import (
    AdmitRequest,
    ObserveRequest,
    RejectRequest,
    ReleaseRequest,
)


def observe(ctx: Ctx, options: dict[str, Any]) -> Output:
    check_observe_counts(options)
    request = request_of(
        ObserveRequest,
        options,
        usage=read_input("--usage", options["usage"]),
        provider_headers=read_input("--provider-headers", options["provider_headers"]),
    )
    with ctx.service(CapacityService, write=True) as ledger:
        answer = ledger.observe(request)
    return output_of("observe", request, answer, ctx.shown())


def admit(ctx: Ctx, options: dict[str, Any]) -> Output:
    options = dict(options)
    wait, timeout_s = options.pop("wait", False), options.pop("wait_timeout_s", None)
    if timeout_s is not None and not wait:
        raise InvalidInput(
            "--wait-timeout-s is how long --wait waits: give --wait too",
            code=codes.INVALID_OPTION,
            option="--wait-timeout-s",
        )
    wait_s = (WAIT_S_DEFAULT if timeout_s is None else timeout_s) if wait else None
    request = request_of(AdmitRequest, options, wait_s=wait_s)
    with ctx.service(CapacityService, write=not request.dry_run) as ledger:
        answer = ledger.admit(request)
    return output_of("admit", request, answer, ctx.shown())


def reject(ctx: Ctx, options: dict[str, Any]) -> Output:
    request = request_of(
        RejectRequest,
        options,
        provider_headers=read_input("--provider-headers", options["provider_headers"]),
    )
    with ctx.service(CapacityService, write=True) as ledger:
        answer = ledger.reject(request)
    return output_of("reject", request, answer, ctx.shown())


def release(ctx: Ctx, options: dict[str, Any]) -> Output:
    request = request_of(ReleaseRequest, options)
    with ctx.service(CapacityService, write=True) as ledger:
        answer = ledger.release(request)
    return output_of("release", request, answer, ctx.shown())


# -- human text ------------------------------------------------------------------------
