"""The memory estimate is an estimate (seed 003's first counterexample).

Two resident workers hand a 64 MiB anonymous mapping from one to the other; the
holder frees before the other allocates, so no stable phase holds both. A sequential
per-process read can still add the holder's PSS before the handoff to the new
holder's after it. The probe must label that sum `sequential_pss_sum`, `atomic:
false`, and never turn it into a verdict, even above `--reference-bytes`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from quotaledger.api import Ledger
from quotaledger.services import probe_io
from tests.support import run_process

WORKLOAD = str(Path(__file__).with_name("handoff_workload.py"))
MIB = 1 << 20
VERDICT_WORDS = ("limit", "exceed", "verdict", "action", "recommend", "challenge")

pytestmark = pytest.mark.skipif(
    not probe_io.sampling_available(), reason="needs /proc/<pid>/smaps_rollup"
)


def assert_no_verdict(value: object, path: str = "$") -> None:
    """No key anywhere in the result claims a limit was exceeded or picks an action."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert not any(word in key.lower() for word in VERDICT_WORDS), f"{path}.{key}"
            assert_no_verdict(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            assert_no_verdict(item, f"{path}[{index}]")


def test_free_running_handoff_is_an_estimate_without_a_verdict(journal_path, tmp_path):
    """The real CLI on the alternating workload: a positive estimate, no verdict."""
    result = run_process(
        "probe", "run", "--journal", journal_path, "--json", "--goal", "g",
        "--interval-ms", "10", "--reference-bytes", str(64 * MIB),
        "--", sys.executable, WORKLOAD, str(tmp_path), "64", "4", "timed", "0.08",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    body = result.json
    memory = body["observation"]["memory"]
    assert memory["method"] == "sequential_pss_sum" and memory["atomic"] is False
    assert memory["peak_estimate_bytes"] > 0
    assert memory["samples"] > 0
    assert 0 <= memory["unavailable_samples"] <= memory["samples"]
    assert body["observation"]["reference_bytes"] == 64 * MIB
    assert_no_verdict(body)


def test_handoff_between_two_reads_inflates_the_estimate_and_still_no_verdict(
    journal_path, tmp_path, monkeypatch
):
    """Seed 003's reproduction: right after the sampler reads the holder's real
    smaps_rollup, the handoff happens; the next read (the new holder's, also real)
    is added to it. Each stable phase is below the reference, the sum is above it,
    and the observation still carries no verdict."""
    real_read = probe_io.read_pss_bytes
    seen: dict[str, int] = {}

    def group_total(parent: int) -> int:
        group = probe_io.Group(parent, parent, 0)
        return sum(real_read(pid) or 0 for pid in group.live_members())

    def read_then_hand_off(pid: int) -> int | None:
        value = real_read(pid)
        pids_file, ready = tmp_path / "pids.json", tmp_path / "ready"
        if "estimate_round" in seen:
            if pid == seen["holder"]:  # the next round began: the handoff round ended
                (tmp_path / "finish").touch()  # the workers may exit now
            return value
        if not (pids_file.exists() and ready.exists()):
            return value
        pids = json.loads(pids_file.read_text())
        if pid != pids["holder"]:
            return value
        seen["holder"] = pids["holder"]
        seen["phase_before"] = group_total(pids["parent"])
        (tmp_path / "go").touch()
        deadline = time.monotonic() + 30
        while not (tmp_path / "done").exists():
            assert time.monotonic() < deadline, "the workload never completed the handoff"
            time.sleep(0.001)
        time.sleep(0.05)  # let the old holder's munmap settle before measuring
        seen["phase_after"] = group_total(pids["parent"])
        seen["estimate_round"] = 1
        return value

    monkeypatch.setattr(probe_io, "read_pss_bytes", read_then_hand_off)
    reference = 100 * MIB
    with Ledger.open(journal_path) as ledger:
        result = ledger.probe_run(
            goal="g",
            command=[sys.executable, WORKLOAD, str(tmp_path), "64", "1", "controlled"],
            reference_bytes=reference,
            interval_ms=10,
            timeout_s=60,
        )
        latest = ledger.latest_probe(goal="g")
    assert result["exit_code"] == 0
    memory = result["observation"]["memory"]
    stable_max = max(seen["phase_before"], seen["phase_after"])
    # Each stable phase holds one mapping (plus the interpreters), below the reference...
    assert 64 * MIB <= stable_max < reference
    # ...but the sequential sum counted the mapping twice, crossing the reference.
    assert memory["peak_estimate_bytes"] > stable_max + 48 * MIB
    assert memory["peak_estimate_bytes"] > reference
    assert memory["atomic"] is False and memory["method"] == "sequential_pss_sum"
    assert set(memory) == {
        "method", "atomic", "peak_estimate_bytes", "samples", "unavailable_samples",
    }  # fmt: skip
    assert_no_verdict(result)
    assert latest["latest"]["observation"] == result["observation"]


def test_sampler_keeps_a_bounded_evenly_thinned_picture():
    """Rounds beyond the kept maximum thin the kept list; counts and peak stay exact."""
    sampler = probe_io.Sampler(probe_io.Group(1, 1, 0), kept_max=8)
    for index in range(100):
        sampler._record(probe_io.Round(index / 10, index % 37, 1, int(index % 10 == 0)))
    assert sampler.rounds == 100
    assert sampler.unavailable_rounds == 10
    assert sampler.peak_bytes == 36
    assert len(sampler.kept) < 8
    kept = [round(r.t_s * 10) for r in sampler.kept]
    assert kept == list(range(0, 100, sampler.stride))[: len(kept)]
    assert kept[-1] >= 100 - 2 * sampler.stride  # thinned, yet spanning the whole run


def test_membership_ignores_other_groups_and_older_processes():
    this = probe_io.read_stat(1)
    assert this is not None
    group = probe_io.Group(this.pgrp, this.session, this.start_ticks + 1)
    assert not group.is_member(this)  # started before the group: a recycled pid
    assert not probe_io.Group(this.pgrp + 1, this.session, 0).is_member(this)
    assert probe_io.Group(this.pgrp, this.session, this.start_ticks).is_member(this)
