"""The rules pass `snakemake --lint` on the default and the cluster config, and are snakefmt-formatted."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize("configfile", [None, "config/full.yaml"])
def test_snakemake_lint_is_clean(configfile):
    cmd = [str(BIN / "snakemake"), "--lint", "--cores", "1"] + (["--configfile", configfile] if configfile else [])
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "good condition" in out.stdout + out.stderr


def test_rules_are_snakefmt_formatted():
    files = ["Snakefile", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "workflow" / "rules").glob("*.smk"))]
    out = subprocess.run([str(BIN / "snakefmt"), "--check", *files], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
