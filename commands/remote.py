"""A client of `quotaledger serve` (SPEC §11): the Python API and the CLI over HTTP.

    with Ledger.open("http://127.0.0.1:8765") as ledger:    # or https://..., unix:PATH
        decision = ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=2000)

`RemoteLedger` has the in-process `Ledger`'s methods (one per use case the server
serves), answers the same dicts and raises the same `quotaledger.Error` subclasses,
chosen by the error body's code and the `Quotaledger-Exit-Code` header. Writers are
`POST /v1/NAME` with the keyword arguments as a JSON body, readers `GET /v1/NAME?...`.
The token comes from `QUOTALEDGER_TOKEN` only (an argument would show in `ps`).

HTTP is `quotaledger.client.http`'s (a socket, httptools' parser), which the lean CLI
client shares; one connection is reused for every call of a ledger.
"""

from __future__ import annotations

import math
import re
import threading
import typing
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from quotaledger.client.http import Connection, query_string
from quotaledger.journal import codes
from quotaledger.journal.errors import (
    Error,
    InvalidInput,
    JournalCorrupt,
    JournalPoisoned,
    JournalReplaced,
    LedgerClosed,
    LockTimeout,
    Names,
    NotAJournal,
    NotRegularFile,
    ServerUnreachable,
    StorageFailure,
    TimeInFuture,
    TimeRegression,
)
from quotaledger.journal.limits import HTTP_WAIT_S_MAX
from quotaledger.journal.target import is_remote_target
from quotaledger.render.outcome import ANSWERED, error_of_body
from quotaledger.usecases.decode import API, HTTP, decode
from quotaledger.usecases.registry import SERVED, USE_CASES
from quotaledger.usecases.waiting import queue_ttl_s, wait_for_admission

_BY_CODE: dict[str, type[Error]] = {
    codes.TIME_REGRESSION: TimeRegression,
    codes.TIME_IN_FUTURE: TimeInFuture,
    codes.NOT_REGULAR_FILE: NotRegularFile,
    codes.NOT_A_JOURNAL: NotAJournal,
    codes.JOURNAL_REPLACED: JournalReplaced,
    codes.LOCK_TIMEOUT: LockTimeout,
    codes.JOURNAL_POISONED: JournalPoisoned,
    codes.LEDGER_CLOSED: LedgerClosed,
    codes.SERVER_UNREACHABLE: ServerUnreachable,
}
_BY_EXIT: dict[int, type[Error]] = {2: InvalidInput, 3: JournalCorrupt, 4: StorageFailure}


def not_served(name: str) -> InvalidInput:
    return InvalidInput(
        f"{name} is not served over HTTP; run it where the journal is, with its path",
        code=codes.REMOTE_NOT_SERVED,
        command=name,
    )


def error_of(
    status: int, exit_code: int | None, body: dict[str, Any], params: dict[str, Any]
) -> Error:
    """The `quotaledger.Error` an error body stands for, as the local call raises it.

    A message that begins with one of the call's parameters (`at 2026-... is earlier
    than ...`) is about it (`Error.about`), so the CLI words it with its flag as the
    local command does."""
    error, exit_code = error_of_body(status, exit_code, body)
    context = {k: v for k, v in error.items() if k not in ("code", "message")}
    code = str(error.get("code") or codes.SERVER_PROTOCOL_ERROR)
    error_type = _BY_CODE.get(code)
    if error_type is None or error_type.exit_code != exit_code:
        error_type = _BY_EXIT.get(exit_code, Error)
    message = str(error.get("message", ""))
    named = context.pop("parameters", None)
    about = next((name for name in params if message.startswith(name + " ")), None)
    if isinstance(named, list) and all(isinstance(name, str) for name in named):
        raised = error_type(_rewordable(message, named), code=code, about=tuple(named), **context)
    elif about is None:
        raised = error_type(message, code=code, **context)
    else:
        rest = message[len(about) :]
        raised = error_type(lambda name: name + rest, code=code, about=about, **context)
    raised.exit_code = exit_code
    return raised


def _rewordable(message: str, parameters: list[str]) -> Callable[[Names], str]:
    """A message naming `parameters` in order (the API's names), as a function of a
    caller's names for them."""
    pieces: list[str] = []
    rest = message
    for name in parameters:
        found = re.search(rf"(?<![\w-]){re.escape(name)}(?!\w)", rest)
        if found is None:
            break
        pieces += [rest[: found.start()], name]
        rest = rest[found.end() :]
    pieces.append(rest)

    def worded(names: Names) -> str:
        return "".join(names(piece) if i % 2 else piece for i, piece in enumerate(pieces))

    return worded


def checked(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of a call of `name` checked here, before anything is sent,
    as the local call checks them (the same error, the same code: a NaN, bytes or a
    timedelta never reaches the wire to be sent as something else; a usage body or
    provider headers read as the service will read them), and given as the
    request holds them (an aware datetime as its RFC 3339 text)."""
    request = decode(USE_CASES[name].request_type(), kwargs, API)
    request.check_contents()
    return {key: msgspec.to_builtins(getattr(request, key), enc_hook=str) for key in kwargs}


class Client:
    """Calls of the server's use cases by name: a JSON answer, or the Error it stands for."""

    def __init__(self, target: str) -> None:
        self.connection = Connection(target)
        self._turn = threading.Lock()

    def call(self, name: str, params: dict[str, Any]) -> bytes:
        """The answer body of use case `name` (exit 0 or 1), else raises its Error."""
        if name not in SERVED:
            raise not_served(name)
        if params.get("follow") is False:  # the default; `follow=true` streams
            params = {key: value for key, value in params.items() if key != "follow"}
        wire = {HTTP(key): value for key, value in params.items()}  # `class`, not `class_`
        if USE_CASES[name].writes:
            method, path, body = "POST", f"/v1/{name}", msgspec.json.encode(wire, enc_hook=str)
        else:
            method, path, body = "GET", f"/v1/{name}{query_string(wire)}", None
        with self._turn:
            status, exit_code, answer = self.connection.request(method, path, body)
        if exit_code in ANSWERED:
            return answer
        try:
            decoded = msgspec.json.decode(answer)
        except msgspec.DecodeError:
            decoded = {}
        raise error_of(status, exit_code, decoded, params)

    def follow(self, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """`log(follow=True)`: the events as they commit, one dict a line, as the local
        call yields them (on a connection of its own, closed with the iterator)."""
        wire = {HTTP(key): value for key, value in params.items()}
        connection = Connection(self.connection.target)
        status, exit_code, pieces = connection.stream(f"/v1/log{query_string(wire)}")
        if exit_code not in ANSWERED:
            body = b"".join(pieces)
            try:
                decoded = msgspec.json.decode(body)
            except msgspec.DecodeError:
                decoded = {}
            raise error_of(status, exit_code, decoded, params)
        return _lines(pieces)

    def close(self) -> None:
        self.connection.close()


def _lines(pieces: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    rest = b""
    for piece in pieces:
        *lines, rest = (rest + piece).split(b"\n")
        for line in lines:
            if line.strip():
                yield msgspec.json.decode(line)


def decode_answer(body: bytes) -> Any:
    """A JSON answer, or JSON Lines (the log's records) as a list."""
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        return [msgspec.json.decode(line) for line in body.splitlines() if line.strip()]


class RemoteLedger:
    """The Python API over HTTP: `Ledger`'s methods, answers and exceptions."""

    closed = False

    def __init__(self, target: str) -> None:
        self.target = target
        self.client = Client(target)

    @classmethod
    def open(cls, target: str) -> RemoteLedger:
        return cls(target)

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.closed:
            raise LedgerClosed(f"the ledger is closed; {name}() needs an open one")
        if args:
            raise InvalidInput(
                f"{name}() takes keyword arguments only (got {len(args)} positional)",
                code=codes.INVALID_ARGUMENT,
            )
        if name in SERVED:
            kwargs = checked(name, kwargs)
        if name == "log" and kwargs.get("follow"):
            return self.client.follow(kwargs)
        if name == "admit" and kwargs.get("wait_s"):
            return waiting_admit(
                lambda params: decode_answer(self.client.call(name, params)), kwargs
            )
        return decode_answer(self.client.call(name, kwargs))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.close()

    def abort(self) -> None:
        """From another thread: end the call in flight (it raises ServerUnreachable) and
        refuse later ones; `close` still follows."""
        self.client.connection.abort()

    def __enter__(self) -> RemoteLedger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _remote_method(name: str) -> Any:
    def call(self: RemoteLedger, /, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, args, kwargs)

    call.__name__ = call.__qualname__ = name
    return call


for _name in USE_CASES:
    setattr(RemoteLedger, _name, _remote_method(_name))


def typed_answer(answer_type: Any, data: Any) -> Any:
    """`data` as `answer_type` where it holds unions of untagged Structs (an answer of
    one of several shapes, told apart by their members): each such union is decided by
    which member's fields the object's keys are."""
    args = typing.get_args(answer_type)
    if isinstance(answer_type, type) and issubclass(answer_type, msgspec.Struct):
        fields = msgspec.structs.fields(answer_type)
        given = {
            f.name: typed_answer(f.type, data[f.encode_name])
            for f in fields
            if f.encode_name in data
        }
        return answer_type(**given)
    if not args:
        return msgspec.convert(data, answer_type)
    origin = typing.get_origin(answer_type)
    if origin is list:
        return [typed_answer(args[0], item) for item in data]
    if origin is dict:
        return {key: typed_answer(args[1], value) for key, value in data.items()}
    structs = [a for a in args if isinstance(a, type) and issubclass(a, msgspec.Struct)]
    if data is None or not structs or not isinstance(data, dict):
        return msgspec.convert(data, answer_type)
    for member in structs:
        fields = msgspec.structs.fields(member)
        names = {f.encode_name for f in fields}
        required = {f.encode_name for f in fields if f.required}
        if required <= data.keys() <= names:
            return typed_answer(member, data)
    raise msgspec.ValidationError(f"no shape of {answer_type} has the keys {sorted(data)}")


class RemoteService:
    """A CLI command's service over HTTP (`Ctx.service` on a server's URL): a typed
    use case's method takes its request and answers its answer type, decoded from the
    body, so the command's text renderer reads it as it reads the local answer; a
    method not yet typed takes keyword arguments and answers the dict."""

    def __init__(self, target: str) -> None:
        self.client = Client(target)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in USE_CASES:  # `journal`: the server's own
            raise AttributeError(name)

        def call(request: msgspec.Struct | None = None, /, **kwargs: Any) -> Any:
            # A typed call's other keywords are the local process's (a progress bar).
            if request is None:
                return decode_answer(self.client.call(name, kwargs))
            answer_type = USE_CASES[name].answer_type()
            params = msgspec.to_builtins(request)
            if name == "admit" and params.get("wait_s"):
                return waiting_admit(
                    lambda wire: msgspec.json.decode(
                        self.client.call(name, wire), type=answer_type
                    ),
                    params,
                )
            body = self.client.call(name, params)
            if USE_CASES[name].streams:  # JSON Lines: an answer per line
                lines = body.splitlines()
                return [msgspec.json.decode(line, type=answer_type) for line in lines if line]
            try:
                return msgspec.json.decode(body, type=answer_type)
            except TypeError:  # a union of answer shapes, which msgspec cannot decode
                return typed_answer(answer_type, msgspec.json.decode(body))

        return call

    def close(self) -> None:
        self.client.close()


def waiting_admit(call: Callable[[dict[str, Any]], Any], params: dict[str, Any]) -> Any:
    """`admit` with `wait_s` through a server (SPEC §12.2): the server holds each request
    at most HTTP_WAIT_S_MAX, so a longer wait asks again with what is left of it; the
    entry's ttl is set here, from the whole wait (the server's default is 600 s)."""
    wait_s = params["wait_s"]
    ttl_s = queue_ttl_s(
        queue=True,
        queue_ttl_s=params.get("queue_ttl_s"),
        wait_s=wait_s,
        lease_s=params.get("lease_s"),
    )
    fixed = {**params, "queue": True, "queue_ttl_s": ttl_s}

    def poll(remaining_s: float) -> Any:
        held_s = min(math.ceil(remaining_s), HTTP_WAIT_S_MAX)
        return call({**fixed, "wait_s": held_s})

    def pause_s(answer: Any) -> float | None:
        queued = answer.get("queued") if isinstance(answer, dict) else answer.queued
        return 0.0 if queued is True else None  # the server held it: ask again at once

    return wait_for_admission(poll, pause_s, wait_s)


__all__ = ["RemoteLedger", "RemoteService", "is_remote_target"]
