"""Job logs: progress lines go to the rule's ``log:`` file as they happen (line-buffered)."""

from __future__ import annotations

import logging
import os
import sys


def process_age() -> float | None:
    """Seconds since this process started (Linux /proc), or None where that is unknown."""
    try:
        start_ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
        uptime = float(open("/proc/uptime").read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def to_file(path: str) -> None:
    """Send this job's logging, warnings and stray stderr to ``path``; quiet the libraries' progress bars."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    stream = open(path, "a", buffering=1)
    sys.stderr = stream
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=stream, force=True)
    logging.captureWarnings(True)
    age = process_age()
    if age is not None:
        # The job's fixed cost before any work: interpreter, Snakemake's script preamble, imports.
        logging.getLogger("selfheal").info("job start-up: %.2f s", age)
    # transformers and datasets read the variables above when (and if) a job imports them: importing them here
    # only to quiet them cost every job about 1.5 s (datasets alone), most of a heal job's fixed cost.
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
