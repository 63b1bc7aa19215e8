"""Keep the finished jobs of a study run in pieces, and resume it from them on another machine.

    python reference/study_next/keep.py save WORKDIR [--with-work]   # WORKDIR/results/study_next -> run/ here
    python reference/study_next/keep.py resume WORKDIR                # run/ here -> WORKDIR/results/study_next

``save`` copies every output of a finished job (the corpus, each network, baseline and cell, the lr check's runs,
the logs) and none of a running one (Snakemake's markers of incomplete outputs name those), records each file's
modification time in ``mtimes.tsv`` and removes from run/ what it no longer keeps. ``--with-work``, once the run is
stopped, also keeps the staging under work/ (the checkpoints of the jobs it stopped, written atomically), so that
those jobs go on from where they were instead of from the start. ``resume`` copies the files back and restores
their times, so that ``snakemake --rerun-triggers mtime`` sees the finished jobs as up to date and trains only
what is missing (a fresh clone gives every file the time of the checkout, in no useful order).
"""

import base64
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN, MTIMES, RESULTS = HERE / "run", HERE / "mtimes.tsv", Path("results/study_next")
SKIP = ("work",)  # a cell's or network's staging while it trains (its finished outputs are elsewhere)


def running(workdir: Path) -> list[Path]:
    """The outputs of the jobs running now (or killed mid-run) in ``workdir``: Snakemake's incomplete markers."""
    marks = workdir / ".snakemake" / "incomplete"
    return [workdir / base64.b64decode(m.name).decode() for m in marks.iterdir()] if marks.is_dir() else []


def save(workdir: Path, with_work: bool = False) -> None:
    source = workdir / RESULTS
    busy = [p.resolve() for p in running(workdir)]
    kept = []
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        rel = path.relative_to(source)
        if (rel.parts[0] in SKIP and not with_work) or any(
            path.resolve() == b or b in path.resolve().parents for b in busy
        ):
            continue
        dest = RUN / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists() or dest.stat().st_mtime != path.stat().st_mtime:
            shutil.copy2(path, dest)
        kept.append(f"{rel}\t{path.stat().st_mtime_ns}")
    MTIMES.write_text("\n".join(kept) + "\n")
    names = {k.split("\t")[0] for k in kept}
    for path in [p for p in RUN.rglob("*") if p.is_file() and str(p.relative_to(RUN)) not in names]:
        path.unlink()  # a job's staging it finished since, or an output it replaced
    print(f"kept {len(kept)} files ({sum((RUN / k.split(chr(9))[0]).stat().st_size for k in kept) / 1e6:.1f} MB)")


def resume(workdir: Path) -> None:
    dest = workdir / RESULTS
    n = 0
    for line in MTIMES.read_text().splitlines():
        rel, ns = line.split("\t")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(RUN / rel, target)
        os.utime(target, ns=(int(ns), int(ns)))
        n += 1
    print(f"restored {n} files into {dest}")


if __name__ == "__main__":
    verb, workdir = sys.argv[1], Path(sys.argv[2])
    if verb == "save":
        save(workdir, with_work="--with-work" in sys.argv[3:])
    else:
        resume(workdir)
