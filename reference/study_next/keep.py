"""Keep the finished jobs of a study run in pieces, and resume it from them on another machine.

    python reference/study_next/keep.py save WORKDIR [--with-work]   # WORKDIR/results/study_next -> run/ here
    python reference/study_next/keep.py resume WORKDIR                # run/ here -> WORKDIR/results/study_next

``save`` copies every output of a finished job (the corpus, each network with its baseline and cells, the logs)
and none of a running one (Snakemake's markers of incomplete outputs name those), records each file's modification
time in ``mtimes.tsv`` and removes from run/ what it no longer keeps. ``--with-work`` also keeps the staging under
work/ of the network jobs not finished (their checkpoints, written atomically, so it may be taken while they run),
so that those jobs go on from where they were instead of from the start; without it, the staging the last
``--with-work`` kept stays as it was. Staging is never kept for a network whose job has finished (no job reads it
again), nor are the tables, page and figures made from the kept outputs (remade in seconds). ``resume`` copies the files back and restores their
times, so that ``snakemake --rerun-triggers mtime`` sees the finished jobs as up to date and trains only what is
missing (a fresh clone gives every file the time of the checkout, in no useful order). Both also carry Snakemake's
record of each kept job (``.snakemake/metadata``: its rule, start and end time), which ``benchmarks/study.py`` reads
for the study's wall time and breakdown, into ``metadata/`` here.
"""

import base64
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN, MTIMES, RESULTS = HERE / "run", HERE / "mtimes.tsv", Path("results/study_next")
METADATA, RECORDS = HERE / "metadata", Path(".snakemake/metadata")  # Snakemake's job records, one per output
WORK = "work"  # a network job's staging while it trains: work/{model}/p{seed}/ (its outputs are elsewhere)
# the training jobs' outputs; the tables, page and figures made from them are remade in seconds, so not kept
KEPT = ("corpus", "models", "baselines", "cells", "logs", WORK)


def running(workdir: Path) -> list[Path]:
    """The outputs of the jobs running now (or killed mid-run) in ``workdir``: Snakemake's incomplete markers."""
    marks = workdir / ".snakemake" / "incomplete"
    return [(workdir / base64.b64decode(m.name).decode()).resolve() for m in marks.iterdir()] if marks.is_dir() else []


def _is_busy(path: Path, busy: list[Path]) -> bool:
    """Whether ``path`` is (or lies under) an output of a running job."""
    path = path.resolve()
    return any(path == b or b in path.parents for b in busy)


def network_done(rel: Path, source: Path, busy: list[Path]) -> bool:
    """Whether the staging file ``rel`` (``work/{model}/p{seed}/...``) belongs to a network whose job has finished:
    its cells folder exists and is no running job's output."""
    if len(rel.parts) < 3:
        return False
    cells = source / "cells" / rel.parts[1] / rel.parts[2]
    return cells.exists() and not _is_busy(cells, busy)


def save(workdir: Path, with_work: bool = False) -> None:
    source = workdir / RESULTS
    busy = running(workdir)
    kept = []
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        rel = path.relative_to(source)
        if len(rel.parts) < 2 or rel.parts[0] not in KEPT:
            continue
        if rel.parts[0] == WORK and (not with_work or network_done(rel, source, busy)):
            continue
        if rel.parts[0] != WORK and _is_busy(path, busy):
            continue
        dest = RUN / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists() or dest.stat().st_mtime_ns != path.stat().st_mtime_ns:
            shutil.copy2(path, dest)
        kept.append(f"{rel}\t{path.stat().st_mtime_ns}")
    if not with_work:  # the staging kept by the last --with-work stays until its network is done
        kept += [
            line
            for line in _lines()
            if line.startswith(f"{WORK}/") and not network_done(Path(line.split("\t")[0]), source, busy)
        ]
    MTIMES.write_text("\n".join(sorted(kept)) + "\n")
    names = {k.split("\t")[0] for k in kept}
    for path in [p for p in RUN.rglob("*") if p.is_file() and str(p.relative_to(RUN)) not in names]:
        path.unlink()  # a network's staging whose job finished since, or an output it replaced
    size = sum((RUN / k.split("\t")[0]).stat().st_size for k in kept)
    print(f"kept {len(kept)} files ({size / 1e6:.1f} MB)")
    save_records(workdir, busy)


def save_records(workdir: Path, busy: list[Path]) -> None:
    """Snakemake's record of every kept job's outputs (a record is named by its output's path in base64): those
    under the study's results whose output exists and belongs to no running job; removed here when it no longer
    does."""
    kept = set()
    for record in sorted((workdir / RECORDS).glob("*")):
        output = base64.b64decode(record.name).decode()
        path = workdir / output
        inside = output.startswith(tuple(f"{RESULTS}/{d}/" for d in KEPT if d != WORK))
        if not inside or not path.exists() or _is_busy(path, busy):
            continue
        METADATA.mkdir(exist_ok=True)
        shutil.copy2(record, METADATA / record.name)
        kept.add(record.name)
    for stale in [p for p in METADATA.glob("*") if p.name not in kept]:
        stale.unlink()
    print(f"kept {len(kept)} job records")


def _lines() -> list[str]:
    return MTIMES.read_text().splitlines() if MTIMES.exists() else []


def resume(workdir: Path) -> None:
    dest = workdir / RESULTS
    n = 0
    for line in _lines():
        rel, ns = line.split("\t")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(RUN / rel, target)
        os.utime(target, ns=(int(ns), int(ns)))
        n += 1
    print(f"restored {n} files into {dest}")
    records = workdir / RECORDS
    records.mkdir(parents=True, exist_ok=True)
    for record in sorted(METADATA.glob("*")):
        shutil.copy2(record, records / record.name)
    print(f"restored {len(list(METADATA.glob('*')))} job records into {records}")


if __name__ == "__main__":
    verb, workdir = sys.argv[1], Path(sys.argv[2])
    if verb == "save":
        save(workdir, with_work="--with-work" in sys.argv[3:])
    else:
        resume(workdir)
