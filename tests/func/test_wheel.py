"""The built wheel is complete: installed in a fresh environment, outside the checkout,
it plans the shipped examples (package data) by name and by path."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.func.conftest import ROOT


def test_an_installed_wheel_plans_the_demo_and_the_examples(base: Path) -> None:
    uv = shutil.which("uv")
    assert uv is not None, "uv is installed by scripts/bootstrap.sh"
    dist = base / "dist"
    subprocess.run(
        [uv, "build", "--wheel", "-o", str(dist), "-q"], cwd=ROOT, check=True, timeout=300
    )
    (wheel,) = dist.glob("pgfsbench-*.whl")
    venv = base / "venv"
    subprocess.run([uv, "venv", "-q", str(venv), "--python", sys.executable], check=True)
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(wheel)],
        check=True,
        timeout=600,
    )
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    for spec in ("quick", "examples/quick.toml", "dbi-2024.toml"):
        done = subprocess.run(
            [str(venv / "bin" / "pgfsbench"), "plan", spec, "--workdir", str(base / "work")],
            cwd=elsewhere,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (spec, done.stdout, done.stderr)
        assert "repetitions =" in done.stdout and "runs" in done.stdout
    # the demo finds its spec in the installed package, not in a checkout
    found = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from pgfsbench.cli.run import demo_spec; print(demo_spec())",
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert found.startswith(str(venv)) and found.endswith("pgfsbench/examples/quick.toml")
