"""`quotaledger bench --serve` end to end on a tiny run: every system runs, the report
has its shape, and every figure is a measurement (positive). Nothing is timed here:
the targets are judged by the bench itself, on request."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import run_cli, run_process

SERVERS = {"server_observe", "server_admit_release", "skeleton", "bare_asgi"}
SYSTEMS = SERVERS | {"sqlite", "redis", "raw"}
MEASURED = {"events", "events_per_s", "p50_ms", "p99_ms", "max_ms", "busiest_to_least"}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
@pytest.mark.skipif(
    shutil.which("strace") is None and os.environ.get("CI") != "true",
    reason="needs strace (CI installs it): the slow disk is emulated with it",
)
def test_a_tiny_bench_serve_measures_every_system_at_each_n(tmp_path: Path) -> None:
    result = run_process(
        "bench", "--serve", "--clients", "1", "--clients", "2", "--seconds", "0.1",
        "--rounds", "1", "--dir", str(tmp_path), "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["clients"] == [1, 2] and report["rounds"] == 1
    assert set(report["measurements"]) == {"1", "2", "slow_disk"}
    slow = report["measurements"].pop("slow_disk")
    assert set(slow) == {"server_observe", "one_writer_loop"}
    for name, measured in slow.items():
        for key in MEASURED:
            assert measured[key] > 0, (name, key, measured)
    # Each fdatasync is held 1 ms: the slow disk SPEC §9 names (p50 >= 1 ms).
    assert slow["one_writer_loop"]["p50_ms"] >= 1.0
    assert figures_of(report)["slow_disk_observe_2_vs_one_writer_loop"]["target"] is None
    for at in report["measurements"].values():
        assert set(at) == SYSTEMS
        for name, measured in at.items():
            for key in MEASURED:
                assert measured[key] > 0, (name, key, measured)
            cpu = measured["server_cpu_us_per_event"]
            assert (cpu > 0) if name in SERVERS else (cpu is None), (name, measured)
        assert at["server_observe"]["events"] >= 2  # each client's own, at least one
    assert all(eps > 0 for eps in report["in_process_api_eps"].values())
    figures = figures_of(report)
    for workload in ("observe", "admit_release"):
        for n in (1, 2):
            for what in ("vs_sqlite", "vs_raw", "vs_redis", "p99_vs_redis", "cpu_vs_skeleton"):
                found = figures[f"{workload}_{n}_{what}"]
                assert found["value"] > 0 and found["baseline"] > 0 and found["ratio"] > 0
            # Beside the skeleton, the bare ASGI app on the same HTTP stack (issue 42).
            found = figures[f"{workload}_{n}_cpu_vs_bare_asgi"]
            assert found["ratio"] > 0 and found["target"] is None
            assert figures[f"{workload}_{n}_busiest_to_least"]["value"] >= 1
        assert figures[f"{workload}_1_vs_in_process_api"]["target"] == "ratio >= 0.5"
    for n in (1, 2):
        found = figures[f"skeleton_{n}_cpu_vs_bare_asgi"]
        assert found["value"] > 0 and found["baseline"] > 0 and found["ratio"] > 0
        assert found["unit"] == "us/event" and found["met"] is None  # stated at 12 and 32
    # SPEC §9 states the throughput ratios at 12 and 32 only: not judged at 1 and 2.
    assert figures["observe_2_vs_sqlite"]["met"] is None
    assert figures["observe_2_busiest_to_least"]["target"] == "value <= 1.25"
    # The queue: both waiters answered after their estimates, the §9 bound stated.
    waits = report["queue_waits"]
    assert waits["clients"] == 2 and waits["answered"] == 2 and waits["earliest_ms"] >= 0
    assert figures["queue_wait_2_answered_p99_ms"]["target"] == "value <= 50"
    assert not list(tmp_path.iterdir())  # the scratch directory is gone
    # No server outlives the bench, the one under strace for the slow disk included.
    left = [cmd for cmd in _command_lines() if str(tmp_path) in cmd]
    assert not left, left


def _command_lines() -> list[str]:
    lines = []
    for proc in Path("/proc").iterdir():
        try:
            raw = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
        except OSError:  # exited meanwhile
            continue
        lines.append(raw.replace(b"\0", b" ").decode(errors="replace"))
    return lines


def test_the_bare_asgi_baseline_is_judged_at_12_and_32_only() -> None:
    # The skeleton's CPU per event over the bare ASGI app's, paired in one run: issue
    # 42 holds it to 1.25x at 12 and 32 clients; elsewhere it is reported unjudged.
    from quotaledger.tools.bench_serve import judge

    def at(skeleton_cpu: float) -> dict[str, Any]:
        row = {"events_per_s": 1000.0, "p99_ms": 1.0, "busiest_to_least": 1.0}
        return {
            "server_observe": {**row, "server_cpu_us_per_event": 90.0},
            "server_admit_release": {**row, "server_cpu_us_per_event": 120.0},
            "skeleton": {**row, "server_cpu_us_per_event": skeleton_cpu},
            "bare_asgi": {**row, "server_cpu_us_per_event": 40.0},
            "sqlite": {**row, "server_cpu_us_per_event": None},
            "redis": {**row, "server_cpu_us_per_event": None},
            "raw": {**row, "server_cpu_us_per_event": None},
        }

    api = {"observe": 1000.0, "admit_release": 1000.0}
    figures = judge({"1": at(80.0), "12": at(48.0), "32": at(60.0)}, api)
    assert figures["skeleton_1_cpu_vs_bare_asgi"]["met"] is None
    assert figures["skeleton_12_cpu_vs_bare_asgi"] == {
        "value": 48.0, "unit": "us/event", "baseline": 40.0, "ratio": 1.2,
        "target": "ratio <= 1.25", "met": True,
    }  # fmt: skip
    assert figures["skeleton_32_cpu_vs_bare_asgi"]["met"] is False  # 1.5x
    assert figures["observe_12_cpu_vs_bare_asgi"]["ratio"] == 2.25
    assert figures["observe_12_cpu_vs_bare_asgi"]["target"] is None


def figures_of(report: dict[str, Any]) -> dict[str, Any]:
    figures: dict[str, Any] = report["figures"]
    return figures


def test_bench_serve_options_are_checked_before_anything_runs(tmp_path: Path) -> None:
    for args, message in [
        (["--clients", "2"], "--redis and --clients go with --serve"),
        (["--serve", "--compare", "sqlite"], "accepts only 'postgresql URL'"),
        (["--serve", "--clients", "0"], "--clients must be from 1 to 256"),
        (["--serve", "--redis", "http://x"], "is not a redis:// URL"),
        (["--serve", "--seconds", "0"], "--seconds must be from 0.05 to 600"),
        (["--serve", "--rounds", "0"], "--rounds must be from 1 to 100"),
    ]:
        result = run_cli("bench", *args, "--dir", str(tmp_path))
        assert result.code == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr, (args, result.stderr)
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_a_given_redis_gets_appendfsync_always_and_its_settings_back(tmp_path: Path) -> None:
    # `--redis URL` measures someone's own Redis: fsynced per write for the bench,
    # and afterwards exactly as it was.
    from quotaledger.tools.bench_serve_systems import (
        free_port,
        given_redis,
        redis_call,
        redis_connection,
    )

    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
         "--appendonly", "no", "--appendfsync", "everysec", "--save", ""],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_listening(port, server)

        def settings() -> list[str]:
            with redis_connection("127.0.0.1", port, None) as sock:
                return [
                    redis_call(sock, "CONFIG", "GET", n)[1] for n in ("appendonly", "appendfsync")
                ]

        assert settings() == ["no", "everysec"]
        with given_redis(f"redis://127.0.0.1:{port}") as redis:
            assert settings() == ["yes", "always"]
            with redis_connection("127.0.0.1", port, None) as sock:
                assert redis_call(sock, "EVALSHA", redis.sha, 1, "k", 5, 10) == 1
                assert redis_call(sock, "EVALSHA", redis.sha, 1, "k", 6, 10) == 0  # over
        assert settings() == ["no", "everysec"]
    finally:
        server.kill()
        server.wait()


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"redis-server on {port} did not start")
