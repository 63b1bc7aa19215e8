"""Steps 2-5 of README.md here, and the mechanical part of step 6, done in one go from the repository root once
the study's last cell has finished and `snakemake --cores 2 --configfile config/study_next.yaml` has aggregated:

    .venv/bin/python reference/study_next/ship/ship.py results/study_next    # RESULTS: the study's results_dir

It moves the config (`config/study.yaml` becomes `config/study_next.yaml` with `results_dir: results/study`),
ships RESULTS to `reference/study/`, puts the drafted README section and docs/study.md top in place, copies the
shipped page's headline into the README, swaps the tests, renames the study's paths where they are plain
references (not in CHANGELOG.md, which is history), removes `reference/study_next/`, and lists every mention of
`study_next` left for a hand edit. It stops before anything when the tree is not clean or RESULTS lacks a page.
What stays by hand: step 6's lr-check bullet and breakdown (`benchmarks/study.py`), step 7's note, the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
OLD_MARKER = "<!-- headline of reference/study_next/finished/answer.md -->"
RENAMES = [  # plain references, longest first
    ("reference/study_next/finished/answer.md", "reference/study/answer.md"),
    ("reference/study_next/finished/", "reference/study/"),
    ("config/study_next.yaml", "config/study.yaml"),
    ("results/study_next", "results/study"),
    ("study.md#the-re-run-under-the-method", "study.md"),  # that section becomes the page's top
    ('"study_next.yaml"', '"study.yaml"'),  # a path joined in code (benchmarks/retrain_data.py)
    (
        " (the\nstudy's own, or `reference/study_next/run` after `keep.py resume`)",
        " (the\nstudy's own)",
    ),  # keep.py goes
]
SKIP = {"CHANGELOG.md"}


def run(*cmd: str) -> None:
    print("+", " ".join(cmd))
    subprocess.run(cmd, cwd=ROOT, check=True)


def replace_section(text: str, start: str, end: str, new: str, keep_end: bool) -> str:
    """``text`` with the part from ``start`` through ``end`` (``end`` kept when ``keep_end``) replaced by ``new``."""
    i, j = text.index(start), text.index(end)
    assert i < j, (start, end)
    return text[:i] + new + text[j if keep_end else j + len(end) :]


def main() -> None:
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if results is None or not (results / "answer.md").is_file():
        sys.exit(f"usage: ship.py RESULTS (the study's results_dir, with its answer.md); got {results}")
    if subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout.strip():
        sys.exit("the working tree is not clean: commit or stash first, so that the ship is one reviewable change")

    # step 2: the config
    config = (ROOT / "config" / "study_next.yaml").read_text()
    assert config.count("results_dir: results/study_next\n") == 1
    (ROOT / "config" / "study.yaml").write_text(
        config.replace("results_dir: results/study_next\n", "results_dir: results/study\n")
    )
    run("git", "rm", "-q", "config/study_next.yaml")

    # step 3: the tables, page and figures
    shutil.rmtree(ROOT / "reference" / "study")
    run(sys.executable, "-m", "selfheal.results", "ship", str(results.resolve()), "reference/study")

    # step 4: the README's section and headline, the finished part and its test
    readme = (ROOT / "README.md").read_text()
    intro = (HERE / "readme_study_intro.md").read_text()
    readme = replace_section(readme, "## The reference study\n", OLD_MARKER, intro.rstrip("\n"), keep_end=False)
    (ROOT / "README.md").write_text(readme)
    run(sys.executable, "-m", "selfheal.analysis.answer", "--readme", "reference/study/answer.md", "README.md")
    run("git", "rm", "-q", "-r", "reference/study_next/finished", "tests/test_reference_study_next.py")

    # step 5: the test of the shipped study
    shutil.copy(HERE / "test_reference_study.py", ROOT / "tests" / "test_reference_study.py")

    # step 6, its mechanical part: docs/study.md's top
    study = (ROOT / "docs" / "study.md").read_text()
    top = (HERE / "study_md_top.md").read_text()
    study = replace_section(
        study, "# The reference study\n", "### Choosing the regime\n", top.rstrip("\n") + "\n\n", True
    )
    (ROOT / "docs" / "study.md").write_text(study)

    # the drafts are in place: the rest of reference/study_next goes
    run("git", "rm", "-q", "-r", "reference/study_next")
    shutil.rmtree(ROOT / "reference" / "study_next", ignore_errors=True)

    # plain references to the study's paths, then what is left for a hand edit
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    left = []
    for name in tracked.split():
        path = ROOT / name
        if name in SKIP or path.suffix not in {".md", ".py", ".yaml", ".smk", ".txt"} or not path.is_file():
            continue
        text = path.read_text()
        new = text
        for old, to in RENAMES:
            new = new.replace(old, to)
        if new != text:
            path.write_text(new)
        left += [f"{name}:{n}: {line.strip()}" for n, line in enumerate(new.splitlines(), 1) if "study_next" in line]
    run("git", "add", "-A")
    print("\nstudy_next mentions left for a hand edit (then steps 6 and 7 of the shipping notes, and the suite):")
    print("\n".join(left) or "none")


if __name__ == "__main__":
    main()
