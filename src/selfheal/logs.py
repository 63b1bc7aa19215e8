"""Job logs: progress lines go to the rule's ``log:`` file as they happen (line-buffered)."""

from __future__ import annotations

import logging
import os
import sys


def to_file(path: str) -> None:
    """Send this job's logging, warnings and stray stderr to ``path``; quiet the libraries' progress bars."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    stream = open(path, "a", buffering=1)
    sys.stderr = stream
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=stream, force=True
    )
    logging.captureWarnings(True)
    try:
        import datasets
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        datasets.disable_progress_bars()
    except ImportError:
        pass
