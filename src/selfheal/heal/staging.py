"""Work kept across runs of a job: each finished piece (a trained network, a healed cell) is staged in the job's
work folder with a fingerprint of what it depends on (its settings and the content of its input files), and the
job's outputs are hard links to the staged files. Snakemake removes a job's outputs before it runs it again (a
pretraining seed, retrain seed or cell was added, or the job was killed); the staged files stay, so the re-run keeps
every piece whose fingerprint still matches and computes only the rest."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

FINGERPRINT = "fingerprint.txt"
SETTINGS = "settings.txt"  # a hash of the piece's settings alone: what a plan made before the job runs can check


def digest(inputs: list[str]) -> str:
    """The content of every input file (files under a folder included; Snakemake's hidden markers left out): a
    SHA-256 over their paths, sizes and bytes. Content, not times: a cluster's Snakemake touches a finished group
    job's outputs after the fact, which must not invalidate the pieces made from them."""
    h = hashlib.sha256()
    for path in map(Path, inputs):
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            if f.name.startswith(".snakemake"):
                continue
            h.update(f"{f}\0{f.stat().st_size}\0".encode())
            with f.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 24), b""):
                    h.update(chunk)
    return h.hexdigest()


def fingerprint(**parts) -> str:
    """What a staged piece depends on, as one hash: its settings and an input ``digest`` (JSON, keys sorted)."""
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def is_staged(folder: Path, fingerprint_: str, outputs: tuple[str, ...]) -> bool:
    """``folder`` holds every one of ``outputs`` and was made under this fingerprint."""
    stamp = folder / FINGERPRINT
    return all((folder / o).exists() for o in outputs) and stamp.exists() and stamp.read_text() == fingerprint_


def has_settings(folder: Path, settings: str, outputs: tuple[str, ...]) -> bool:
    """``folder`` holds every one of ``outputs``, made under these settings (``settings``: a ``fingerprint`` of the
    settings alone; the inputs' content is not checked, so a plan can ask before the inputs exist)."""
    stamp = folder / SETTINGS
    return all((folder / o).exists() for o in outputs) and stamp.exists() and stamp.read_text() == settings


def begin(folder: Path, fingerprint_: str, outputs: tuple[str, ...], settings: str | None = None) -> None:
    """Start (or restart) a piece in ``folder``: its old outputs removed, its fingerprint written (a checkpoint it
    leaves there is resumed by the next run only under the same fingerprint), and ``settings`` (``has_settings``)."""
    stamp = folder / FINGERPRINT
    if stamp.exists() and stamp.read_text() != fingerprint_:
        shutil.rmtree(folder)
    for o in outputs:
        path = folder / o
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint_)
    if settings is not None:
        (folder / SETTINGS).write_text(settings)


def link(source: Path, target: Path) -> None:
    """``target`` as a hard link to ``source`` (a file, or every file under a folder); a copy where the file system
    has no hard links or the work folder is on another device."""
    files = (
        [(source, target)]
        if source.is_file()
        else [(f, target / f.relative_to(source)) for f in sorted(source.rglob("*")) if f.is_file()]
    )
    for s, t in files:
        t.parent.mkdir(parents=True, exist_ok=True)
        if t.exists():  # an output left in place (Snakemake removes them first): the staged copy replaces it
            if t.samefile(s):
                continue
            t.unlink()
        try:
            os.link(s, t)
        except OSError:
            shutil.copy2(s, t)
