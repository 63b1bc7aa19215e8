"""The first CI stage, format and lint (tests/stages.py): the rules pass `snakemake --lint` on the default and the
cluster config and are snakefmt-formatted, and the Python passes ruff where pyproject.toml configures it."""

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMK_FILES = [  # the core's rules and the published experiments' module (workflow/experiments)
    "Snakefile",
    "workflow/experiments/Snakefile",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "workflow").rglob("*.smk")),
]

pytestmark = pytest.mark.lint


@pytest.mark.parametrize("configfile", [None, "config/full.yaml"])
def test_snakemake_lint_is_clean(configfile):
    cmd = [sys.executable, "-m", "snakemake", "--lint", "--cores", "1"] + (
        ["--configfile", configfile] if configfile else []
    )
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "good condition" in out.stdout + out.stderr


def test_rules_are_snakefmt_formatted():
    out = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", *SMK_FILES], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_snakefmt_check_fails_on_a_misformatted_rule(tmp_path):
    """The check above can fail: the same command rejects a rule file written off snakefmt's format."""
    bad = tmp_path / "bad.smk"
    bad.write_text("rule a:\n  output: 'x'\n  shell: 'touch {output}'\n")
    out = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", str(bad)], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode != 0, out.stdout + out.stderr


def test_python_is_ruff_clean():
    """The place of the ruff checks (lint and format) in this stage: it runs once pyproject.toml has a [tool.ruff] section and ruff is
    installed (the test extra)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    if "ruff" not in pyproject.get("tool", {}):
        pytest.skip("pyproject.toml has no [tool.ruff] section: ruff is not part of this project's lint stage yet")
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("pyproject.toml configures ruff but it is not installed: add it to the test extra")
    for command in (["check", "."], ["format", "--check", "."]):
        out = subprocess.run([sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0, f"ruff {' '.join(command)}:\n{out.stdout}{out.stderr}"
