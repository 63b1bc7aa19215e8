"""How long the test suite takes: the README's test command (`.venv/bin/python -m pytest -q`) timed as one process,
with the counts pytest reports, each CI stage's wall time as the run itself prints it (tests/stages.py: format and
lint, fast tests, end-to-end) and the ten slowest tests (pytest's --durations, on in pyproject.toml).

    .venv/bin/python benchmarks/suite_time.py    # [--fast-only] [--no-write] [--output FILE]

Writes block `test-suite` of docs/performance.md (not with --fast-only, which times the first two stages only).
``--output`` keeps pytest's whole output. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

from common import ROOT, add_write_flag, machine, publish, timed_process

MARKER = "test-suite"
SUITE = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
FAST = [*SUITE, "-m", "not e2e and not slurm"]
STAGE = re.compile(r"^stage (\w+) \(([^)]*)\): (.*?)(?: in ([0-9.]+) s)?$")
DURATION = re.compile(r"^([0-9.]+)s (setup|call|teardown)\s+(\S+)$")


def summary_line(out: str) -> str:
    lines = [
        line
        for line in out.splitlines()
        if re.search(r"\b(passed|failed|error)", line) and "=" in line or re.match(r"^[0-9]+ (passed|failed)", line)
    ]
    return re.sub(r"=+|\s+in [0-9.]+s.*", "", lines[-1]).strip() if lines else "no summary"


def stages(out: str) -> list[tuple[str, str, str, float | None]]:
    """(stage, title, result, wall seconds) from the run's stages section."""
    found = []
    for line in out.splitlines():
        match = STAGE.match(line.strip())
        if match:
            name, title, result, wall = match.groups()
            found.append((name, title, result, float(wall) if wall else None))
    return found


def slowest(out: str, n: int = 10) -> list[tuple[float, str, str]]:
    """(seconds, phase, test) of the slowest ``n`` entries of pytest's durations section."""
    section = out.split("slowest 10 durations", 1)[-1] if "slowest 10 durations" in out else ""
    rows = [m.groups() for m in map(DURATION.match, (line.strip() for line in section.splitlines())) if m]
    return [(float(s), phase, test) for s, phase, test in rows][:n]


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def block(wall: float, out: str) -> str:
    slurm = "with SLURM installed" if shutil.which("slurmctld") else "without SLURM (its one test skipped)"
    lines = [
        f"`.venv/bin/python benchmarks/suite_time.py` on {machine()}, {slurm}: the suite "
        f"(`.venv/bin/python -m pytest -q`) **{minutes(wall)}** ({summary_line(out)}).",
        "",
        "| stage | result | wall |",
        "| --- | --- | --- |",
    ]
    for name, title, result, seconds in stages(out):
        lines.append(f"| {name} ({title}) | {result} | {minutes(seconds) if seconds is not None else '—'} |")
    lines += [
        "",
        "The ten slowest tests (pytest's `--durations=10`):",
        "",
        "| s | phase | test |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {s:.1f} | {phase} | `{test}` |" for s, phase, test in slowest(out)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast-only", action="store_true", help="time only the first two stages")
    parser.add_argument("--output", type=Path, help="write pytest's whole output to this file")
    add_write_flag(parser)
    a = parser.parse_args()
    wall, proc = timed_process(FAST if a.fast_only else SUITE, cwd=ROOT, check=False)
    out, code = proc.stdout, proc.returncode
    if a.output:
        a.output.write_text(out + proc.stderr)
    print(f"{'fast part' if a.fast_only else 'suite'}: {summary_line(out)} in {minutes(wall)}")
    if code != 0:
        sys.exit(f"pytest exited {code}: {summary_line(out)}\n{out[-3000:]}")
    for name, title, result, seconds in stages(out):
        print(f"stage {name} ({title}): {result}" + (f" in {seconds:.1f} s" if seconds is not None else ""))
    if a.fast_only:
        return
    publish(MARKER, block(wall, out), not a.no_write)


if __name__ == "__main__":
    main()
