"""Issue 41: what one face refused and another accepted (or answered otherwise) is
one coded error everywhere: the CLI (local and through a server), the Python API
(local and remote) and HTTP. Nothing is written by any of them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quotaledger import Error, Ledger
from tests.server.serving import Server, serving
from tests.support import run_cli

AT = "2026-11-29T10:00:00Z"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, Server]]:
    journal = tmp_path / "j.jsonl"
    with Ledger.open(str(journal)) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, max_active_cases=3, at=AT)
    with serving(journal) as server:
        yield journal, server


def _code(call: Callable[[], Any]) -> str:
    try:
        call()
    except Error as error:
        assert error.exit_code == 2, error
        return error.code
    return "accepted"


def _every_face(
    journal: Path, server: Server, method: str, kwargs: dict[str, Any], cli: list[str]
) -> dict[str, str]:
    before = journal.read_bytes()
    with Ledger.open(str(journal)) as here, Ledger.open(server.url) as there:
        codes = {
            "api": _code(lambda: getattr(here, method)(**kwargs)),
            "remote": _code(lambda: getattr(there, method)(**kwargs)),
        }
    body = {("class" if k == "class_" else k): v for k, v in kwargs.items()}
    from quotaledger.usecases.registry import SERVED

    if SERVED[method].writes:
        answer = server.post(method, **body)
    else:
        answer = server.get(method, "&".join(f"{k}={v}" for k, v in body.items()))
    codes["http"] = answer.json["error"]["code"] if answer.status == 400 else str(answer.status)
    for face, target in (("cli", str(journal)), ("cli-remote", server.url)):
        done = run_cli(*cli, "--journal", target, "--json")
        codes[face] = done.json["error"]["code"] if done.code == 2 else f"exit {done.code}"
    assert journal.read_bytes() == before, codes
    return codes


def test_a_zero_max_observation_age_is_refused_on_every_face(
    served: tuple[Path, Server],
) -> None:
    journal, server = served
    codes = _every_face(
        journal, server, "configure", {"goal": "g", "max_observation_age_s": 0},
        ["configure", "--goal", "g", "--max-observation-age-s", "0"],
    )  # fmt: skip
    assert set(codes.values()) == {"invalid_config"}, codes


@pytest.mark.parametrize("given", [{}, {"output": 5}], ids=["no counts", "output alone"])
def test_observe_without_its_three_counts_is_usage_on_every_face(
    served: tuple[Path, Server], given: dict[str, int]
) -> None:
    """A heartbeat states its zeros (SPEC §3.5, §3.2): counts left out are a forgotten
    argument, never a zero-token measured observation that refreshes the freshness
    gate. The CLI refused it; the API and HTTP took it as a heartbeat."""
    journal, server = served
    flags = ["--" + name.replace("_", "-") for name in given]
    cli = ["observe", "--goal", "g"]
    for flag, value in zip(flags, given.values(), strict=True):
        cli += [flag, str(value)]
    codes = _every_face(journal, server, "observe", {"goal": "g", **given}, cli)
    assert set(codes.values()) == {"usage"}, codes


def test_a_heartbeat_states_its_zeros_on_every_face(served: tuple[Path, Server]) -> None:
    journal, server = served
    zero = {"uncached_input": 0, "cached_input": 0, "output": 0}
    with Ledger.open(str(journal)) as here, Ledger.open(server.url) as there:
        assert here.observe(goal="g", **zero)["appended"]
        assert there.observe(goal="g", **zero)["appended"]
    assert server.post("observe", goal="g", **zero).status == 200
    # An unmetered observation may leave its counts out: its tokens are unknown, and it
    # refreshes nothing (SPEC §3.2: "its token counts, if any").
    with Ledger.open(str(journal)) as here, Ledger.open(server.url) as there:
        assert here.observe(goal="g", coverage="unmetered")["appended"]
        assert there.observe(goal="g", coverage="unmetered")["appended"]
    assert server.post("observe", goal="g", coverage="unmetered").status == 200
    done = run_cli("observe", "--goal", "g", "--coverage", "unmetered", "--journal", server.url)
    assert done.code == 0, done.stderr


def test_audit_of_a_seq_past_the_head_is_seq_out_of_range_on_every_face(
    served: tuple[Path, Server],
) -> None:
    journal, server = served
    codes = _every_face(journal, server, "audit", {"seq": 99}, ["audit", "--seq", "99"])
    assert set(codes.values()) == {"seq_out_of_range"}, codes


def test_the_http_body_names_class_as_the_answers_do(served: tuple[Path, Server]) -> None:
    _journal, server = served
    given = {"goal": "g", "run": "r1", "arm": "treatment", "forecast_tpm": 10, "dry_run": True}
    answer = server.post("admit", **given, **{"class": "evaluator"})
    assert answer.status == 200, answer.body
    python_spelling = server.post("admit", goal="g", run="r1", class_="evaluator")
    assert python_spelling.status == 400
    assert python_spelling.json["error"]["code"] == "invalid_argument"
    wrong = server.post("admit", goal="g", run="r1", **{"class": "x"})
    assert wrong.json["error"]["code"] == "invalid_choice"
    assert "class must be" in wrong.json["error"]["message"]
    document = server.call("GET", "/openapi.json").json
    admit = document["paths"]["/v1/admit"]["post"]["requestBody"]["content"]
    properties = admit["application/json"]["schema"]["properties"]
    assert "class" in properties and "class_" not in properties
    with Ledger.open(server.url) as remote:  # the Python keyword stays class_
        assert remote.admit(goal="g", run="r2", class_="evaluator", dry_run=True)["ok"] in (
            True,
            False,
        )


def test_a_writer_refuses_query_keys_and_healthz_refuses_post(
    served: tuple[Path, Server],
) -> None:
    journal, server = served
    before = journal.read_bytes()
    answer = server.call(
        "POST", "/v1/observe?zz=1", {"goal": "g", "uncached_input": 1, "cached_input": 0,
                                      "output": 0},
    )  # fmt: skip
    assert answer.status == 400 and answer.json["error"]["code"] == "invalid_argument"
    assert "zz" in answer.json["error"]["message"]
    assert journal.read_bytes() == before
    health = server.call("POST", "/healthz", {})
    assert (health.status, health.exit_code) == (405, 2)
    assert health.json["error"]["code"] == "method_not_allowed"
    assert server.call("GET", "/healthz").status == 200


def test_a_nul_in_free_text_is_invalid_text_on_every_face(served: tuple[Path, Server]) -> None:
    # (argv cannot carry a NUL; the API and HTTP can, and PostgreSQL cannot store one)
    journal, server = served
    before = journal.read_bytes()
    with Ledger.open(str(journal)) as here, Ledger.open(server.url) as there:
        for ledger in (here, there):
            assert _code(lambda ledger=ledger: ledger.reject(goal="g", detail="a\x00b")) == (
                "invalid_text"
            )
    answer = server.post("reject", goal="g", detail="a\x00b")
    assert answer.status == 400 and answer.json["error"]["code"] == "invalid_text"
    assert journal.read_bytes() == before
