"""Seed 003's counterexamples replayed against the real CLI (real processes).

1. [P2] Two resident workers: A frees its exclusive 28 MiB mapping before B allocates
   its own; a sequential read summed both (77.5 MB vs 48 MB stable phases) and, under a
   64 MiB reference, printed `observed_limit_exceeded: true` and a recommended method.
   -> an estimate labelled `sequential_pss_sum`, `atomic: false`, never a verdict or an
   action, even above --reference-bytes; a true overlap stays a positive estimate.
2. [P2] Under a real RLIMIT_FSIZE the optional sidecar's flush/close raised EFBIG and
   the CLI exited 1 and lost its stdout JSON, where the run without it gave exit 7.
   -> exit code, stdout JSON and the journaled observation intact; sidecar unavailable;
   no digest.
3. A sidecar path that cannot be created is an unavailable diagnostic, not a refusal;
   a path that already exists (an evidence conflict) is refused.
4. (approval) A 64 B file limit cut the sidecar short: exit 7 for command and probe,
   stdout JSON, no reference to the partial file.
5. (approval) A path conflict that appears while the command runs only makes the
   sidecar unavailable; the result stays.
6. (approval) A pre-existing dangling symlink is refused before the process starts,
   and the old path is kept.
7. Default off: success, failure and timeout give 0, 7, 124, each journaled.
8. A candidate changed by the run is not attributed (`candidate_changed`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from quotaledger.services import probe_io
from tests.probe.held_probe import ROUNDS_FORCED, needs_strace, run_held
from tests.probe.probe_spec import MEMORY_KEYS, OBSERVATION_KEYS
from tests.support import REPO, line_count, run_cli, run_process

MIB = 1 << 20
VERDICT_WORDS = ("limit", "exceed", "verdict", "action", "recommend", "challenge", "select")

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process groups")

# Each worker maps and touches SIZE MiB. "overlap": both hold at once; "handoff": the
# holder frees before the other allocates (the group never holds both).
WORKERS = r"""
import mmap, os, sys, time
size, mode = int(sys.argv[1]) << 20, sys.argv[2]
def hold(seconds):
    m = mmap.mmap(-1, size)
    for off in range(0, size, 4096):
        m[off] = 1
    time.sleep(seconds)
    m.close()
r, w = os.pipe()
child = os.fork()
if child == 0:
    if mode == "handoff":
        os.read(r, 1)  # wait until the parent freed its mapping
        hold(0.4)
    else:
        hold(0.8)
    os._exit(0)
if mode == "handoff":
    for _ in range(1):
        hold(0.4)
        os.write(w, b"x")
else:
    hold(0.8)
os.waitpid(child, 0)
"""


def probe(journal: str, *args: str, cmd: list[str]) -> Any:
    return run_process("probe", "run", "--journal", journal, "--json", "--goal", "g", *args,
                       "--", *cmd)  # fmt: skip


def one_json_object(stdout: str) -> dict[str, Any]:
    """stdout holds exactly one JSON object (and nothing else but its newline)."""
    body, end = json.JSONDecoder().raw_decode(stdout)
    assert stdout[end:].strip() == "", stdout
    assert isinstance(body, dict)
    return body


def journaled(journal: str) -> list[dict[str, Any]]:
    lines = Path(journal).read_text().splitlines()
    return [json.loads(line) for line in lines if '"kind":"probe.observed"' in line]


def assert_observation_shape(obs: dict[str, Any]) -> None:
    assert set(obs) == OBSERVATION_KEYS
    if obs["memory"] is not None:
        assert set(obs["memory"]) == MEMORY_KEYS
        assert obs["memory"]["method"] == "sequential_pss_sum"
        assert obs["memory"]["atomic"] is False
        assert isinstance(obs["memory"]["samples"], int)
        assert isinstance(obs["memory"]["unavailable_samples"], int)
    assert obs["attribution"] in ("bound", "candidate_changed")


def assert_no_verdict(value: Any, path: str = "$") -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            assert not any(word in key.lower() for word in VERDICT_WORDS), f"{path}.{key}"
            assert_no_verdict(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            assert_no_verdict(item, f"{path}[{index}]")


# -- 1: an estimate, never a verdict -------------------------------------------------------


@pytest.mark.skipif(not probe_io.sampling_available(), reason="needs smaps_rollup")
@pytest.mark.parametrize("mode", ["handoff", "overlap"])
def test_memory_is_an_estimate_without_verdict_even_above_the_reference(journal_path, mode):
    cmd = [sys.executable, "-c", WORKERS, "40", mode]
    result = probe(journal_path, "--interval-ms", "10", "--reference-bytes", str(64 * MIB),
                   cmd=cmd)  # fmt: skip
    assert result.code == 0, result.stderr
    body = one_json_object(result.stdout)
    obs = body["observation"]
    assert_observation_shape(obs)
    assert obs["reference_bytes"] == 64 * MIB
    assert obs["memory"]["samples"] > 0
    if mode == "overlap":  # a true overlap: 80 MiB held at once is seen above 64 MiB
        assert obs["memory"]["peak_estimate_bytes"] > 64 * MIB
    assert_no_verdict(body)
    event = journaled(journal_path)[-1]
    assert event["data"] == obs
    assert_no_verdict(event)


# -- 2 and 4: EFBIG under a real file-size limit ------------------------------------------------


def _limited(limit_bytes: int, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run argv under RLIMIT_FSIZE = limit_bytes (exact bytes, unlike `ulimit -f`)."""
    setter = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_bytes}, {limit_bytes})); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
    )
    return subprocess.run([sys.executable, "-c", setter, *argv], capture_output=True,
                          text=True, timeout=60, cwd=REPO)  # fmt: skip


SHORT = ["sh", "-c", "echo cmd-out; sleep 0.8; exit 7"]  # > 1 KiB of samples


def _probe_argv(journal: str, *args: str) -> list[str]:
    return ["-m", "quotaledger", "probe", "run", "--journal", journal, "--json", "--goal", "g",
            "--interval-ms", "10", *args, "--", *SHORT]  # fmt: skip


@needs_strace
def test_efbig_on_the_sidecar_under_ulimit_keeps_exit_stdout_and_observation(tmp_path):
    """`ulimit -f 1` in a real shell: the sidecar (> 1 KiB) fails, the probe does not.
    Both runs are held until the probe sampled ROUNDS_FORCED rounds: the sidecar's size
    is forced, never hoped for."""
    baseline = tmp_path / "baseline.jsonl"
    limited_journal = tmp_path / "limited.jsonl"
    side = tmp_path / "samples.json"
    common = ["--json", "--goal", "g", "--interval-ms", "10"]
    limited = run_held(
        ["--journal", str(limited_journal), *common, "--sidecar", str(side)], tmp_path
    )
    plain = run_held(["--journal", str(baseline), *common], tmp_path)
    assert plain.returncode == 7 and limited.returncode == 7, limited.stderr
    with_sidecar, without = one_json_object(limited.stdout), one_json_object(plain.stdout)
    obs = with_sidecar["observation"]
    assert_observation_shape(obs)
    assert obs["memory"]["samples"] >= ROUNDS_FORCED  # the premise held
    assert obs["exit_code"] == 7 and without["observation"]["exit_code"] == 7
    assert obs["sidecar"]["status"] == "unavailable" and "EFBIG" in obs["sidecar"]["error"]
    assert set(obs["sidecar"]) == {"status", "error"}  # no path, no digest
    assert without["observation"]["sidecar"] is None
    same = ("command", "candidates", "input_revision", "exit_code", "timed_out", "attribution")
    assert {k: obs[k] for k in same} == {k: without["observation"][k] for k in same}
    assert limited.stderr.startswith("cmd-out\n")  # CMD's stdout went to stderr
    assert not side.exists()  # no partial file left looking like evidence
    assert journaled(str(limited_journal))[-1]["data"] == obs
    assert run_cli("verify", "--journal", str(limited_journal), "--json").code == 0


def test_a_64_byte_limit_on_a_postgresql_journal_cuts_only_the_sidecar(tmp_path, pg_server):
    """The seed's exact 64 B limit: only a journal that is not a file can live with it."""
    schema = "probe_seed003_" + uuid.uuid4().hex[:10]
    url = f"{pg_server}?schema={schema}"
    side = tmp_path / "samples.json"
    result = _limited(64, _probe_argv(url, "--sidecar", str(side)))
    assert result.returncode == 7, result.stderr
    obs = one_json_object(result.stdout)["observation"]
    assert obs["exit_code"] == 7
    assert obs["sidecar"]["status"] == "unavailable"
    assert "EFBIG" in obs["sidecar"]["error"] or "short" in obs["sidecar"]["error"]
    assert not side.exists()
    shown = run_cli("log", "--journal", url, "--json", "--kind", "probe.observed")
    assert json.loads(shown.stdout.splitlines()[-1])["data"] == obs


def test_a_file_journal_that_cannot_grow_under_the_limit_is_refused_before_cmd(tmp_path):
    """The known risk: the journal file obeys the same limit. If even the smallest
    observation cannot fit, the probe says so (exit 4) and never starts CMD."""
    journal = tmp_path / "j.jsonl"
    run_cli("configure", "--journal", str(journal), "--goal", "g", "--quota-tpm", "1000")
    for _ in range(6):
        run_cli("observe", "--journal", str(journal), "--goal", "g", "--uncached-input", "1",
                "--cached-input", "0", "--output", "0")  # fmt: skip
    size = journal.stat().st_size
    marker = tmp_path / "ran"
    argv = ["-m", "quotaledger", "probe", "run", "--journal", str(journal), "--json", "--goal",
            "g", "--", "sh", "-c", f"touch {shlex.quote(str(marker))}; exit 7"]  # fmt: skip
    result = _limited(size + 64, argv)
    assert result.returncode == 4, result.stderr
    error = one_json_object(result.stdout)["error"]
    assert error["code"] == "file_size_limit" and error["command_ran"] is False
    assert "ulimit -f" in error["message"]
    assert not marker.exists()
    assert journal.stat().st_size == size


# -- 3, 5, 6: the sidecar path -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "dangling_symlink"])
def test_an_existing_sidecar_path_is_refused_before_the_command_starts(journal_path, tmp_path,
                                                                       kind):  # fmt: skip
    run_cli("configure", "--journal", journal_path, "--goal", "g", "--quota-tpm", "1000")
    run_cli("observe", "--journal", journal_path, "--goal", "g", "--uncached-input", "1",
            "--cached-input", "0", "--output", "0")  # fmt: skip
    side = tmp_path / "samples.json"
    if kind == "file":
        side.write_text("old evidence")
    else:
        side.symlink_to(tmp_path / "nowhere")
    marker = tmp_path / "ran"
    before = line_count(journal_path)
    result = probe(journal_path, "--sidecar", str(side),
                   cmd=["sh", "-c", f"touch {shlex.quote(str(marker))}"])  # fmt: skip
    assert result.code == 2
    assert one_json_object(result.stdout)["error"]["code"] == "sidecar_exists"
    assert not marker.exists()  # the command never ran
    assert line_count(journal_path) == before
    if kind == "file":
        assert side.read_text() == "old evidence"
    else:
        assert side.is_symlink() and os.readlink(side) == str(tmp_path / "nowhere")


def test_an_uncreatable_sidecar_is_unavailable_and_the_command_runs(journal_path, tmp_path):
    side = tmp_path / "missing-dir" / "samples.json"
    result = probe(journal_path, "--sidecar", str(side), cmd=["sh", "-c", "exit 7"])
    assert result.code == 7, result.stderr
    obs = one_json_object(result.stdout)["observation"]
    assert obs["sidecar"]["status"] == "unavailable" and "open" in obs["sidecar"]["error"]
    assert set(obs["sidecar"]) == {"status", "error"}


def test_a_path_conflict_during_the_run_only_makes_the_sidecar_unavailable(journal_path,
                                                                           tmp_path):  # fmt: skip
    side = tmp_path / "samples.json"
    q = shlex.quote(str(side))
    result = probe(journal_path, "--sidecar", str(side),
                   cmd=["sh", "-c", f"rm -f {q}; echo theirs > {q}; exit 7"])  # fmt: skip
    assert result.code == 7, result.stderr
    obs = one_json_object(result.stdout)["observation"]
    assert obs["sidecar"]["status"] == "unavailable"
    assert "sha256" not in obs["sidecar"]
    assert side.read_text() == "theirs\n"  # someone else's file is left alone


def test_a_written_sidecar_has_its_digest_after_write_and_close(journal_path, tmp_path):
    side = tmp_path / "samples.json"
    result = probe(journal_path, "--sidecar", str(side), "--interval-ms", "10",
                   cmd=["sleep", "0.2"])  # fmt: skip
    assert result.code == 0, result.stderr
    sidecar = one_json_object(result.stdout)["observation"]["sidecar"]
    import hashlib

    blob = side.read_bytes()
    assert sidecar == {"path": str(side), "sha256": hashlib.sha256(blob).hexdigest(),
                       "bytes": len(blob)}  # fmt: skip


# -- 7, 8: default off; attribution -----------------------------------------------------------


@pytest.mark.parametrize(
    ("cmd", "timeout", "code"),
    [(["sh", "-c", "exit 0"], None, 0), (["sh", "-c", "exit 7"], None, 7),
     (["sleep", "30"], "0.5", 124)],
)  # fmt: skip
def test_exit_codes_are_the_commands_and_each_run_is_journaled(journal_path, cmd, timeout, code):
    args = [] if timeout is None else ["--timeout-s", timeout]
    result = probe(journal_path, *args, cmd=cmd)
    assert result.code == code, result.stderr
    body = one_json_object(result.stdout)
    obs = body["observation"]
    assert_observation_shape(obs)
    assert obs["exit_code"] == code and obs["timed_out"] is (code == 124)
    assert obs["sidecar"] is None and obs["command"] == cmd
    assert journaled(journal_path)[-1]["data"] == obs
    assert body["event"]["kind"] == "probe.observed"


def test_a_candidate_changed_by_the_run_is_not_attributed(journal_path, tmp_path):
    candidate = tmp_path / "solver.py"
    candidate.write_text("print(1)\n")
    result = probe(
        journal_path,
        "--candidate",
        str(candidate),
        "--input-revision",
        "r42",
        cmd=["sh", "-c", f"echo '# edited' >> {shlex.quote(str(candidate))}"],
    )
    assert result.code == 0, result.stderr
    obs = one_json_object(result.stdout)["observation"]
    assert obs["attribution"] == "candidate_changed"
    assert obs["input_revision"] == "r42"
    import hashlib

    assert obs["candidates"] == {str(candidate): hashlib.sha256(b"print(1)\n").hexdigest()}
