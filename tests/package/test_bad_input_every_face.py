"""Issue 41's generated sweep: one bad value, one coded error, on every face.

Every served method's every keyword is fed hostile values (numbers out of every
range, NaN and inf, bytes, NUL, a timedelta) and an unknown keyword, through the
Python API in this process, through `Ledger.open(url)` (checked before sending: the
same error comes from a client whose server cannot be reached), and, for the values
JSON can carry, as an HTTP body or query string. Each is one `quotaledger.Error` of
exit 2 with a documented code, the same code on every face, and no journal changes a
byte. (The CLI's side is tests/cli/test_bad_input_generated.py's.)
"""

from __future__ import annotations

import datetime as dt
import json
import re
import typing
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from quotaledger import Error, Ledger
from quotaledger.usecases.registry import SERVED
from tests.package.test_caller_vocabulary import _kinds, _minimal, _setup
from tests.server.serving import free_port, serving
from tests.support import REPO

DOCUMENTED = set(
    re.findall(r"^\| `([a-z_0-9]+)` \| 2 \|", (REPO / "docs/errors.md").read_text(), re.M)
)
HUGE = 10**5000
HOSTILE: list[tuple[str, Any]] = [
    ("huge", HUGE),
    ("-huge", -HUGE),
    ("2**63", 2**63),
    ("nan", float("nan")),
    ("inf", float("inf")),
    ("-inf", float("-inf")),
    ("bytes", b"g"),
    ("nul", "a\x00b"),
    ("timedelta", dt.timedelta(seconds=5)),
]
NOT_FED = {("log", "follow")}
"""`log(follow=...)` waits for events forever once given a true value."""

COUNTED_BY = {"usage": ("uncached_input", "cached_input", "output")}
"""A field given instead of others (a usage body, not the counts)."""

JSON_BODY = {"huge": "9" * 5000, "-huge": "-" + "9" * 5000, "2**63": str(2**63),
             "inf": "1e400", "-inf": "-1e400", "nul": '"a\\u0000b"'}  # fmt: skip
"""The hostile values a JSON body can carry, as its text."""
QUERY = {"huge": "9" * 5000, "-huge": "-" + "9" * 5000, "2**63": str(2**63), "nan": "nan",
         "inf": "inf", "nul": "a\x00b"}  # fmt: skip


def _numeric(case: Any, field: str) -> bool:
    """Whether a reader's query value for `field` is read as a number (`nan` is a
    goal's name as good as any other)."""
    hints = typing.get_type_hints(case.request_type(), include_extras=True)
    return bool(_kinds(hints[field]) & {int, float})


def _outcome(call: Any, kwargs: dict[str, Any]) -> str:
    """The error's code (exit 2 required), else what went wrong in words."""
    try:
        result = call(**kwargs)
        if not isinstance(result, dict):
            list(result)
    except Error as error:
        if error.exit_code != 2:
            return f"exit {error.exit_code} {error.code}: {error.message}"
        if "\n" in error.message:
            return f"a message of several lines: {error.message!r}"
        return error.code
    except Exception as error:  # the defect this test is for
        return f"escaped {type(error).__name__}: {str(error)[:100]}"
    return "accepted"


def _cases(tmp: Path) -> list[tuple[str, str, str, dict[str, Any]]]:
    minimal = _minimal(tmp)
    found = []
    for method, case in sorted(SERVED.items()):
        request_type = case.request_type()
        for field in request_type.__struct_fields__:
            if (method, field) in NOT_FED:
                continue
            given = minimal[method]
            if field in COUNTED_BY:  # the usage body gives what the counts would
                given = {k: v for k, v in given.items() if k not in COUNTED_BY[field]}
            for label, value in HOSTILE:
                found.append((method, field, label, {**given, field: value}))
        found.append((method, "zz_unknown", "unknown", {**minimal[method], "zz_unknown": 1}))
    return found


FAITHFUL = {"2**63", "nul"}
"""Values JSON carries as they are: a reader may answer one in its range."""
THE_JOURNALS_TO_SAY = {("audit", "seq"), ("inspect", "seq")}
"""Where a value is out of range only against the journal (a seq past its head): the
server's to say. Every other range (a config field's, a duration's, a usage body's, a
provider header's) is checked before sending, by the code that checks it locally."""


def _agree(codes: dict[str, str], label: str, method: str, field: str) -> bool:
    """One coded error (exit 2), the same locally and through a server, and the same
    again from a client that cannot reach one: checked before sending (but for a value
    out of range only against the journal). A reader may answer a value in its range
    (`log(last=2**63)`); a writer never takes one here."""
    local, remote, unsent = codes["local"], codes["remote"], codes["unsent"]
    if local == "accepted":
        return not SERVED[method].writes and label in FAITHFUL and remote == local
    if local not in DOCUMENTED or remote != local:
        return False
    journals = (method, field) in THE_JOURNALS_TO_SAY
    return unsent == local or (journals and unsent.startswith("exit 4 server_unr"))


@pytest.fixture
def journals(tmp_path: Path) -> tuple[Path, Path]:
    local, served = tmp_path / "local.jsonl", tmp_path / "served.jsonl"
    for path in (local, served):
        with Ledger.open(str(path)) as ledger:
            _setup(ledger)
    return local, served


def test_the_api_local_and_remote_give_one_code_and_write_nothing(
    tmp_path: Path, journals: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    local, served = journals
    before = local.read_bytes(), served.read_bytes()
    problems: list[str] = []
    nowhere = f"http://127.0.0.1:{free_port()}"
    with (
        serving(served) as server,
        Ledger.open(str(local)) as here,
        Ledger.open(server.url) as there,
        Ledger.open(nowhere) as unsent,
    ):
        for method, field, label, kwargs in _cases(tmp_path):
            codes = {
                "local": _outcome(getattr(here, method), kwargs),
                "remote": _outcome(getattr(there, method), kwargs),
                "unsent": _outcome(getattr(unsent, method), kwargs),
            }
            if not _agree(codes, label, method, field):
                problems.append(f"{method}({field}={label}): {codes}")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)
    for path, old in zip((local, served), before, strict=True):
        added = path.read_bytes()[len(old) :]
        assert path.read_bytes() == old, f"{path.name} grew: {added[:600]!r}"


def test_http_bodies_and_query_strings_give_the_apis_code(
    tmp_path: Path, journals: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    local, served = journals
    before = served.read_bytes()
    problems: list[str] = []
    values = dict(HOSTILE)
    with serving(served) as server, Ledger.open(str(local)) as here:
        for method, field, label, kwargs in _cases(tmp_path):
            case = SERVED[method]
            if case.writes and label in JSON_BODY:
                others = {k: v for k, v in kwargs.items() if k != field}
                key = "class" if field == "class_" else field
                raw = json.dumps(others)[:-1] + (", " if others else "")
                raw += f'"{key}": {JSON_BODY[label]}}}'
                answer = server.call(
                    "POST", f"/v1/{method}", raw=raw.encode(),
                    headers={"Content-Type": "application/json"}, timeout_s=20,
                )  # fmt: skip
            elif not case.writes and label in QUERY and (label == "nul" or _numeric(case, field)):
                query = {k: str(v) for k, v in kwargs.items() if k != field}
                query["class" if field == "class_" else field] = QUERY[label]
                path = f"/v1/{method}?{urllib.parse.urlencode(query)}"
                try:
                    answer = server.call("GET", path, timeout_s=20)
                except TimeoutError:
                    problems.append(f"{method} {field}={label}: no answer in 20 s")
                    continue
            else:
                continue
            first = answer.body.split(b"\n", 1)[0]  # the log's answer is JSON Lines
            code = (json.loads(first).get("error") or {}).get("code") if first else None
            if answer.status == 200 and label in FAITHFUL and not case.writes:
                continue  # a reader's value in its range (`log?last=9223372036854775808`)
            if (answer.status, answer.exit_code) != (400, 2) or code not in DOCUMENTED:
                problems.append(f"{method} {field}={label}: {answer.status} {answer.body[:200]!r}")
                continue
            if case.writes:
                # The body's value is the API's (1e400 is inf): the same code.
                want = _outcome(getattr(here, method), {**kwargs, field: values[label]})
                if want != code:
                    problems.append(f"{method} {field}={label}: HTTP {code}, API {want}")
        assert server.stop() == 0
        assert "Traceback" not in server.stderr()  # a bad input is never an internal error
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)
    assert served.read_bytes() == before
