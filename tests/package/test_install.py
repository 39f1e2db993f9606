"""The package as a user installs it: a wheel in a fresh virtual environment.

One module-scoped venv (building and installing cost tens of seconds) serves every
check: the wheel holds one top-level package, the CLI and `python -m` run from any
directory, PyPI's unrelated `journal` package installs beside it without harm, a
working directory with its own `commands/` and `journal/` packages shadows nothing,
and mypy sees the API's types through `py.typed`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

from quotaledger import __version__

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(
    *args: str | Path, cwd: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QUOTALEDGER_", "PYTHON"))}
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if check:
        assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


SCRATCH = ("*.egg-info", "__pycache__", ".*", "build", "node_modules", "*.jsonl*")
"""What the source copy leaves out: caches, virtual environments, earlier builds."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy: setuptools builds in the source tree's build/, and under
    # xdist two workers each build this module's wheel, which collide there.
    source = tmp_path_factory.mktemp("source") / "quotaledger"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*SCRATCH))
    out = tmp_path_factory.mktemp("wheel")
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, source)
    (built,) = out.glob("quotaledger-*.whl")
    return built


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh venv with the wheel (not editable) and its dependencies."""
    root = tmp_path_factory.mktemp("venv")
    venv.create(root, with_pip=True)
    _run(root / "bin" / "python", "-m", "pip", "install", "-q", wheel)
    return root


def test_the_wheel_installs_one_top_level_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/", 1)[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert tops == {"quotaledger", f"quotaledger-{__version__}.dist-info"}
    for inside in ("journal", "projections", "cli", "services"):
        assert f"quotaledger/{inside}/__init__.py" in names
    assert "quotaledger/py.typed" in names
    assert any(name.endswith("licenses/LICENSE") for name in names)


def test_demo_and_version_from_another_directory(env: Path, tmp_path: Path) -> None:
    demo = _run(env / "bin" / "quotaledger", "demo", cwd=tmp_path)
    assert "audit" in demo.stdout.lower()
    assert (tmp_path / "quotaledger-demo.jsonl").is_file()
    version = _run(env / "bin" / "quotaledger", "--version", cwd=tmp_path)
    assert version.stdout.strip() == f"quotaledger {__version__}"
    module = _run(env / "bin" / "python", "-m", "quotaledger", "--version", cwd=tmp_path)
    assert module.stdout == version.stdout


def test_pypi_journal_package_beside_it_changes_nothing(env: Path, tmp_path: Path) -> None:
    _run(env / "bin" / "python", "-m", "pip", "install", "-q", "journal==0.4.0")
    _run(env / "bin" / "quotaledger", "demo", "--journal", tmp_path / "d.jsonl", cwd=tmp_path)
    verified = _run(
        env / "bin" / "quotaledger", "verify", "--journal", tmp_path / "d.jsonl", cwd=tmp_path
    )
    assert verified.returncode == 0
    api = _run(env / "bin" / "python", "-c", "from quotaledger import Ledger; print(Ledger)")
    assert "quotaledger.api.Ledger" in api.stdout


def test_a_users_own_commands_and_journal_packages_shadow_nothing(
    env: Path, tmp_path: Path
) -> None:
    for name in ("commands", "journal", "projections"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f"raise ImportError('the user package {name} was imported')\n"
        )
    journal = tmp_path / "j.jsonl"
    configured = _run(
        env / "bin" / "quotaledger", "configure", "--journal", journal, "--goal", "g",
        "--quota-tpm", "1000", cwd=tmp_path,
    )  # fmt: skip
    assert configured.returncode == 0
    observed = _run(
        env / "bin" / "quotaledger", "observe", "--journal", journal, "--goal", "g",
        "--uncached-input", "1", "--cached-input", "0", "--output", "1", cwd=tmp_path,
    )  # fmt: skip
    assert observed.returncode == 0
    script = textwrap.dedent(f"""
        from quotaledger import Ledger
        with Ledger.open({str(journal)!r}) as ledger:
            print(ledger.inspect(goal="g")["ok"])
    """)
    api = _run(env / "bin" / "python", "-c", script, cwd=tmp_path)  # cwd is on sys.path
    assert api.stdout.strip() == "True"


def test_mypy_sees_the_api_types(env: Path, tmp_path: Path) -> None:
    user = tmp_path / "runner.py"
    user.write_text(
        textwrap.dedent("""
        from quotaledger import Ledger

        with Ledger.open("j.jsonl") as ledger:
            ledger.observe(goal="g", uncached_input="12", cached_input=0, output=0)
        """)
    )
    mypy = Path(sys.executable).parent / "mypy"
    done = _run(
        mypy, "--python-executable", env / "bin" / "python", "--no-incremental", user,
        cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert 'Argument "uncached_input"' in done.stdout and '"str"' in done.stdout, done.stdout
    assert "missing library stubs" not in done.stdout
