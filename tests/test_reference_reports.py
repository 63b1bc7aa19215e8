"""A browsable report of each shipped reference from what ships (``python -m selfheal.analysis.answer --report``):
its page in HTML with every figure it links embedded, no link left to a file that does not ship."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("run", ["study", "fully_trained", "default", "pilot"])
def test_a_shipped_reference_has_its_report(run, tmp_path):
    folder = ROOT / "reference" / run
    out = tmp_path / f"{run}.html"
    cmd = [sys.executable, "-m", "selfheal.analysis.answer", "--report", str(folder), str(out)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    html = out.read_text()
    linked = set(re.findall(r"\]\(plots/([A-Za-z0-9_]+)\.png\)", (folder / "answer.md").read_text()))
    assert linked and linked <= {p.stem for p in (folder / "plots").glob("*.png")}
    assert html.count("data:image/png;base64,") == len(linked)
    assert not re.search(r"href=.plots/", html)  # every figure link points into the file itself
    assert "<h2>The answer</h2>" in html and "<table>" in html
