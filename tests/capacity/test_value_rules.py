"""SPEC §8's value rules hold the same on both paths: the requests' checks and the
payload types, both built from journal/limits.py.

Free text is at most 4 KiB: bytes, in UTF-8, on the requests' path (usecases.fields'
`check_text`) and on the payloads' (decoding, which every append and every read does).
Multi-byte text right at the limit is where counting characters would differ from counting bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
import pytest

from quotaledger.api import Ledger
from quotaledger.journal.errors import InvalidInput
from quotaledger.projections import capacity, hosts, probes, settlement
from quotaledger.projections.limits import FREE_TEXT_BYTES_MAX, TOKEN_COUNT_MAX
from quotaledger.projections.types import FreeText, Payload, TextTooLong, _checked_fields
from quotaledger.usecases.fields import check_text, check_tokens
from tests.capacity.capacity_helpers import observed_data

AT_LIMIT = {
    "ascii": "a" * 4096,
    "two-byte": "é" * 2048,
    "three-byte": "€" * 1365 + "a",
    "four-byte": "😀" * 1024,
}
assert all(len(text.encode()) == FREE_TEXT_BYTES_MAX for text in AT_LIMIT.values())
OVER_LIMIT = {
    **{f"{name} + 1 byte": text + "a" for name, text in AT_LIMIT.items()},
    # 2,049 characters: within a limit counted in characters, 4,098 bytes.
    "two-byte, few characters": "é" * 2049,
}

DECODE_OBSERVED = msgspec.json.Decoder(capacity.CapacityObserved).decode


def observed(source: str) -> bytes:
    return msgspec.json.encode(observed_data(source=source))


def test_every_free_text_field_is_found() -> None:
    events = {**capacity.EVENTS, **hosts.EVENTS, **settlement.EVENTS, **probes.EVENTS}
    found = {kind: _checked_fields(t)[2] for kind, t in events.items()}
    assert {kind: names for kind, names in found.items() if names} == {
        "capacity.observed": ("source",),
        "capacity.rejected": ("detail",),
        "host.attempt_returned": ("cursor",),
        "probe.observed": ("command", "input_revision"),
    }
    assert _checked_fields(hosts.Failure)[2] == ("detail",)
    assert _checked_fields(probes.Sidecar)[2] == ("error",)


@pytest.mark.parametrize("text", AT_LIMIT.values(), ids=AT_LIMIT.keys())
def test_text_at_the_limit_passes_both_paths(text: str) -> None:
    assert check_text("--source", text) == text
    assert DECODE_OBSERVED(observed(text)).source == text


@pytest.mark.parametrize("text", OVER_LIMIT.values(), ids=OVER_LIMIT.keys())
def test_text_over_the_limit_fails_both_paths(text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_text("--source", text)
    assert refused.value.code == "invalid_text"
    # msgspec's character count refuses what is too long in characters as well.
    with pytest.raises(msgspec.ValidationError, match=r"longer than 4 KiB|length <= 4096"):
        DECODE_OBSERVED(observed(text))
    with pytest.raises(TextTooLong) as built:
        msgspec.structs.replace(DECODE_OBSERVED(observed("s")), source=text)
    assert built.value.code == "invalid_text"


class _Texts(Payload, frozen=True):
    command: Annotated[list[FreeText], msgspec.Meta(min_length=1)]


def test_each_text_of_a_list_is_measured() -> None:
    decode = msgspec.json.Decoder(_Texts).decode
    assert decode(msgspec.json.encode({"command": ["x", AT_LIMIT["four-byte"]]}))
    with pytest.raises(msgspec.ValidationError, match="longer than 4 KiB"):
        decode(msgspec.json.encode({"command": ["x", OVER_LIMIT["four-byte + 1 byte"]]}))


def test_the_api_writes_text_at_the_limit_and_the_journal_verifies(tmp_path: Path) -> None:
    text = AT_LIMIT["three-byte"]
    with Ledger.open(tmp_path / "j.jsonl") as ledger:
        ledger.configure(goal="g", quota_tpm=1000)
        ledger.observe(goal="g", uncached_input=1, cached_input=0, output=1, source=text)
        with pytest.raises(InvalidInput) as refused:
            ledger.observe(goal="g", uncached_input=1, cached_input=0, output=1, source=text + "a")
        assert refused.value.code == "invalid_text"
        assert ledger.verify()["ok"] is True
        (record,) = [e for e in ledger.log(goal="g") if e["kind"] == "capacity.observed"]
        assert record["data"]["source"] == text


@pytest.mark.parametrize(("count", "valid"), [(0, True), (TOKEN_COUNT_MAX, True), (-1, False),
                                              (TOKEN_COUNT_MAX + 1, False)])  # fmt: skip
def test_token_counts_agree_on_both_paths(count: int, valid: bool) -> None:
    body = msgspec.json.decode(observed("s"))
    try:
        DECODE_OBSERVED(msgspec.json.encode({**body, "uncached_input": count}))
        decoded = True
    except msgspec.ValidationError:
        decoded = False
    try:
        checked = check_tokens("--uncached-input", count) == count
    except InvalidInput:
        checked = False
    assert decoded == checked == valid
