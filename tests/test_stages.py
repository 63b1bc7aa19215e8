"""The CI stages on pytest-xdist workers (tests/stages.py, tests/units.py), on a throwaway suite run by a real
pytest with two workers: a failure in the fast stage is named with its stage, later-stage tests that had not
started are skipped saying why, and the stage summary says the end-to-end stage did not run in full."""

import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

SUITE = """
import time

import pytest


def test_fails_at_once():
    assert False


@pytest.mark.parametrize("i", range(8))
@pytest.mark.e2e
def test_later(i):
    time.sleep(0.3)
"""


def test_a_failed_stage_stops_the_next_on_every_worker(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["stages", "units"]\n')
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    e2e: end-to-end\n")
    (tmp_path / "test_throwaway.py").write_text(SUITE)
    stage_file = tmp_path / "stages.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SELFHEAL_", "PYTEST_XDIST"))}
    env.update(PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]), SELFHEAL_STAGE_FILE=str(stage_file))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    assert "failed in stage fast (fast tests): test_throwaway.py::test_fails_at_once" in stage_file.read_text()
    assert "FAILED in stage fast (fast tests): test_throwaway.py::test_fails_at_once" in out
    assert "stage e2e (end-to-end): not run, an earlier stage failed" in out, out[-3000:]
    # at most the one e2e test each worker may have started before the failure came runs; the others skip, saying why
    assert "stage fast (fast tests) failed: later stages do not run" in out, out[-3000:]
    assert int(re.search(r"(\d+) skipped", out.splitlines()[-1]).group(1)) >= 8 - 2, out[-3000:]
