"""What the benchmarks share: writing a figure into its page (``write_block``, ``publish``), the machine in words,
and starting and timing Snakemake."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
PERFORMANCE = ROOT / "docs" / "performance.md"
# the measurement benchmarks' base settings (its own comment says why they are not config/config.yaml's)
BASE_CONFIG = Path(__file__).resolve().parent / "base_config.yaml"


def block_markers(marker: str) -> tuple[str, str]:
    """The begin and end comments that enclose the figure block ``marker`` in a page."""
    return f"<!-- {marker}: begin -->", f"<!-- {marker}: end -->"


def write_block(marker: str, markdown: str, page: Path = PERFORMANCE) -> None:
    """Replace the text between ``<!-- {marker}: begin -->`` and ``<!-- {marker}: end -->`` in ``page`` with
    ``markdown``, set off by blank lines (the markers stay; nothing else in the page changes). Raises
    ``ValueError`` if the page lacks either marker, has one twice or has them out of order."""
    page = Path(page)
    begin, end = block_markers(marker)
    text = page.read_text()
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"{page} must hold {begin!r} and {end!r} exactly once each")
    head, rest = text.split(begin)
    if end not in rest:
        raise ValueError(f"{page}: {end!r} comes before {begin!r}")
    _, tail = rest.split(end)
    page.write_text(f"{head}{begin}\n\n{markdown.strip()}\n\n{end}{tail}")


def read_block(marker: str, page: Path = PERFORMANCE) -> str:
    """The text between the markers of block ``marker`` in ``page``, stripped (what ``write_block`` wrote)."""
    begin, end = block_markers(marker)
    match = re.search(re.escape(begin) + r"(.*?)" + re.escape(end), Path(page).read_text(), re.S)
    if match is None:
        raise ValueError(f"{page} lacks block {marker!r}")
    return match.group(1).strip()


def add_write_flag(parser: argparse.ArgumentParser) -> None:
    """``--no-write``: print the figure block without writing it into its page."""
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="only print the figure block; do not write it into its documentation page",
    )


def publish(marker: str, markdown: str, write: bool, page: Path = PERFORMANCE, why_not: str | None = None) -> None:
    """Print the figure block ``marker`` and, if ``write`` and no ``why_not`` (e.g. options other than the
    documented run's), write it into ``page`` through ``write_block``."""
    print(f"\n{block_markers(marker)[0]}\n{markdown.strip()}\n{block_markers(marker)[1]}")
    where = Path(page).resolve().relative_to(ROOT) if Path(page).resolve().is_relative_to(ROOT) else page
    if not write:
        print(f"not written (--no-write): {where}")
    elif why_not:
        print(f"not written to {where}: {why_not}")
    else:
        write_block(marker, markdown, page)
        print(f"written: block {marker!r} of {where}")


def machine() -> str:
    """The machine a figure was measured on, in words: cores and their model, memory, torch version, GPU if any.
    Two machines with the same number of cores can differ by a factor of 2 or more, so the model is named."""
    import torch

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    model = cpu_model()
    cores = f"{os.cpu_count()} cores" + (f" ({model})" if model else "")
    return f"{cores}, {memory:.0f} GB, {gpu}, torch {torch.__version__.split('+')[0]}"


def cpu_model() -> str:
    """The processor's model name as the kernel reports it ("" where it does not)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else ""


# ---------------------------------------------------------------------------------------------------- timing


def snakemake_env(pythonpath: str | None = None) -> dict:
    """The environment the benchmarks start Snakemake in.

    Every Snakemake start imports snakemake-executor-plugin-slurm, which runs `scontrol show config` while
    defining its settings. On a machine with SLURM's client installed and no controller answering (CI installs
    SLURM for tests/test_slurm.py, which starts the controller only for itself) that call blocks 9 s per
    Snakemake start, a cost that neither a laptop without SLURM nor a cluster whose controller answers pays.
    There, SLURM_CONF points at an empty file (as in tests/conftest.py), so the plugin finds no SLURM at once;
    the benchmark says so when it does."""
    env = dict(os.environ)
    if pythonpath:  # in front of the caller's own path, not instead of it
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, os.environ.get("PYTHONPATH")]))
    if "SLURM_CONF" in env or shutil.which("scontrol") is None:
        return env
    try:
        answered = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=3).returncode == 0
    except subprocess.TimeoutExpired:
        answered = False
    if not answered:
        print(
            "SLURM's client is installed here but no controller answers: Snakemake is started with "
            "SLURM_CONF=/dev/null, as on a machine without SLURM (else each start waits 9 s on `scontrol`)"
        )
        env["SLURM_CONF"] = "/dev/null"
    return env


def snakemake_command(workdir: Path, *args: str) -> list[str]:
    """The project's Snakefile run by this Python's Snakemake in ``workdir``, with ``args``."""
    return [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]


def timed_process(
    cmd: list[str], env: dict | None = None, cwd: Path | None = None, check: bool = True
) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, the finished process) of one command, output captured; with ``check``, a failure ends the
    benchmark with the command's last stderr."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    if check and proc.returncode:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{(proc.stderr or proc.stdout)[-3000:]}")
    return wall, proc


def step_batches(steps: int, vocab: int = 1024, rows: int = 32, context: int = 64) -> list[dict]:
    """Fixed random token batches for a step benchmark (seed 0)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    return [{"input_ids": torch.randint(3, vocab, (rows, context), generator=generator)} for _ in range(steps)]


def interleaved_ms(ways: dict, batches: list, warm: int, per: int = 1) -> dict[str, float]:
    """Each way's median ms per step (divided by ``per``: per copy), the ways alternating step by step on the same
    batches, the first ``warm`` steps untimed."""
    import statistics
    import time

    times = {way: [] for way in ways}
    for i, batch in enumerate(batches):
        for way, step in ways.items():
            start = time.perf_counter()
            step(batch)
            if i >= warm:
                times[way].append((time.perf_counter() - start) * 1000 / per)
    return {way: statistics.median(t) for way, t in times.items()}
