"""benchmarks/gpu_check.py's copies-per-pass part runs on a CPU at a tiny size (the GPU figures need a GPU; the
numbers here mean nothing, the code path is the one a GPU runs)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_copies_per_pass_check_runs_on_a_cpu():
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu", "--tiny", "--passes-only"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout
    rows = re.findall(r"^\| (tiny-n2-d\d+) \| (\d+) \| ([\d.]+) \| ([\d,]+) \|", out, flags=re.M)
    assert [(m, int(k)) for m, k, _, _ in rows] == [(m, k) for m in ("tiny-n2-d16", "tiny-n2-d32") for k in (1, 4, 16)]
    for _, k, ms, examples in rows:  # examples/s is K copies x 16 sequences per step
        assert (
            abs(int(examples.replace(",", "")) - int(k) * 16 / (float(ms) / 1000))
            <= 0.01 * int(k) * 16 / (float(ms) / 1000) + 1
        )
