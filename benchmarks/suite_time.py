"""How long the test suite takes: the README's test command (`.venv/bin/python -m pytest -q`) and its fast part
(`-m "not e2e and not slurm"`), each timed as one process, with the counts pytest reports.

    .venv/bin/python benchmarks/suite_time.py    # [--fast-only] [--no-write]

Writes block `test-suite` of docs/performance.md (not with --fast-only). Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys

from common import ROOT, add_write_flag, machine, publish, timed_process

MARKER = "test-suite"
SUITE = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
FAST = [*SUITE, "-m", "not e2e and not slurm"]


def run(cmd: list[str]) -> tuple[float, str]:
    """(wall seconds, pytest's summary line) of one pytest run from the repository root."""
    wall, proc = timed_process(cmd, cwd=ROOT, check=False)
    lines = [line for line in proc.stdout.splitlines() if re.search(r"\b(passed|failed|error)", line)]
    summary = re.sub(r"=+|\s+in [0-9.]+s.*", "", lines[-1]).strip() if lines else "no summary"
    if proc.returncode not in (0,):
        sys.exit(f"pytest exited {proc.returncode}: {summary}\n{proc.stdout[-3000:]}")
    return wall, summary


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast-only", action="store_true", help="time only the fast part")
    add_write_flag(parser)
    a = parser.parse_args()
    fast_wall, fast_summary = run(FAST)
    print(f"fast part: {fast_summary} in {minutes(fast_wall)}")
    if a.fast_only:
        return
    wall, summary = run(SUITE)
    print(f"suite: {summary} in {minutes(wall)}")
    slurm = "with SLURM installed" if shutil.which("slurmctld") else "without SLURM (its one test skipped)"
    text = (f"`.venv/bin/python benchmarks/suite_time.py` on {machine()}, {slurm}: the suite "
            f"(`.venv/bin/python -m pytest -q`) **{minutes(wall)}** ({summary}); the fast part "
            f"(`-m \"not e2e and not slurm\"`) {minutes(fast_wall)} ({fast_summary}).")
    publish(MARKER, text, not a.no_write)


if __name__ == "__main__":
    main()
