"""The answer: the tables under ``results/answer/`` (``answer_tables``), the page ``results/answer.md`` and
``answer.html`` (``page``: a template over the tables and their verdict columns, ``verdicts``) and its figures (``answer_plots``), every number read from the Parquet tables the
workflow wrote (summary, curves, networks, and the lr-sensitivity table where ``retrain.lr_sensitivity`` is on). ``write_all`` is what the ``answer`` rule runs.

``python -m selfheal.analysis.answer --readme results/answer.md README.md`` copies the page's headline into the
README (between its ``answer:headline`` markers); ``--report reference/study study.html`` writes one browsable
file of a run as it ships (``report``).
"""

from __future__ import annotations

import argparse
import base64
import re
from pathlib import Path

import pandas as pd

from selfheal import results_io
from selfheal.analysis import answer_plots, answer_tables, page, plots

TABLES = answer_tables.TABLES
LR_SENSITIVITY = "lr_sensitivity"  # answer/lr_sensitivity.parquet: written by its own rule, only when the check is on
LEFT_OUT = "left_out"  # answer/left_out.parquet: what a readout with partial: true leaves out (its own rule's)
HEADLINE = page.HEADLINE


def write_all(
    summary_path: str,
    curves_path: str,
    networks_path: str,
    table_paths: dict[str, str],
    md_path: str,
    html_path: str,
    plot_html: dict[str, str],
    plot_png: dict[str, str],
    workers: int = 1,
    lr_sensitivity_path: str | None = None,
    left_out_path: str | None = None,
) -> None:
    """Everything the ``answer`` rule makes: the answer tables, the page (Markdown and HTML) and its figures.
    Plot links on the page are relative to the page's folder. ``lr_sensitivity_path``: the lr-sensitivity table
    (``analysis.lr_sensitivity``, its own rule's), read for its sentence; None when the check is off.
    ``left_out_path``: what a readout with ``partial: true`` leaves out (``selfheal.partial``), which the page names
    first; None for a whole study."""
    summary = pd.read_parquet(summary_path)
    curves = pd.read_parquet(curves_path)
    networks = pd.read_parquet(networks_path)
    tables = answer_tables.compute(summary, curves, networks, workers)
    for name in TABLES:
        results_io.write_parquet(table_paths[name], tables[name])
    if lr_sensitivity_path:
        tables[LR_SENSITIVITY] = pd.read_parquet(lr_sensitivity_path)
    if left_out_path:
        tables[LEFT_OUT] = pd.read_parquet(left_out_path)
    folder = Path(md_path).parent
    links = {
        name: str(Path(path).resolve().relative_to(folder.resolve()))
        if Path(path).resolve().is_relative_to(folder.resolve())
        else str(path)
        for name, path in plot_html.items()
    }
    md = page.markdown(tables, summary, networks, links)
    Path(md_path).write_text(md)
    Path(html_path).write_text(page.html(md))
    for name, draw in answer_plots.FIGURES.items():
        plots.save(draw(tables, curves), plot_html[name], plot_png[name])


def write_in(run: Path, workers: int = 1, lr_sensitivity_path: str | None = None, left_out_path: str | None = None):
    """``write_all`` in a run folder's own layout: its summary, curves and networks tables beside ``answer/``,
    ``plots/`` and the page (a readout of a study still running, a shipped run re-derived)."""
    figures = answer_plots.FIGURES
    write_all(
        *(str(run / f"{name}.parquet") for name in ("summary", "curves", "networks")),
        {name: str(run / "answer" / f"{name}.parquet") for name in TABLES},
        str(run / "answer.md"),
        str(run / "answer.html"),
        {name: str(run / "plots" / f"{name}.html") for name in figures},
        {name: str(run / "plots" / f"{name}.png") for name in figures},
        workers=workers,
        lr_sensitivity_path=lr_sensitivity_path,
        left_out_path=left_out_path,
    )


def headline(md_text: str) -> str:
    """The headline block of a page, markers included."""
    start, end = md_text.index(HEADLINE[0]), md_text.index(HEADLINE[1]) + len(HEADLINE[1])
    return md_text[start:end]


def short(md_text: str) -> str:
    """The page's answer in short: its section "The answer" (the headline block, then the answer in detail and the
    table per model)."""
    return md_text.split("\n## The answer\n", 1)[1].split("\n## ", 1)[0]


def source_marker(page_path: str) -> str:
    """The line that names the page a README headline block is copied from (the block follows it)."""
    return f"<!-- headline of {page_path} -->"


def update_readme(page_path: str, readme_path: str) -> None:
    """Replace the README's headline block (between the markers) with the page's: the block after the line
    ``source_marker(page_path)`` where the README has one (a README may carry the headlines of several pages),
    else the first block."""
    block = headline(Path(page_path).read_text())
    text = Path(readme_path).read_text()
    marker = source_marker(page_path)
    after = text.index(marker) + len(marker) if marker in text else 0
    start = text.index(HEADLINE[0], after)
    end = text.index(HEADLINE[1], start) + len(HEADLINE[1])
    Path(readme_path).write_text(text[:start] + block + text[end:])


def report(run: Path, out: Path) -> Path:
    """One browsable file for a run as it ships (its page and the PNG figures it links, ``plots/*.png``): the page
    in HTML with each figure embedded after it, in the order the page links them; a link to a figure that does not
    ship is kept as a link. Needs no Snakemake metadata, so a shipped reference has its report too."""
    md = (run / "answer.md").read_text()
    names = list(dict.fromkeys(re.findall(r"\]\((plots/[A-Za-z0-9_]+\.png)\)", md)))
    figures = []
    for name in names:
        path = run / name
        if path.is_file():
            data = base64.b64encode(path.read_bytes()).decode()
            figures.append(
                f"<h3 id='{path.stem}'>{path.stem}</h3><img src='data:image/png;base64,{data}' width='100%'>"
            )
    for name in names:
        if (run / name).is_file():
            md = md.replace(f"]({name})", f"](#{Path(name).stem})")
    text = page.html(md).replace("</body>", "<h2>Figures</h2>\n" + "\n".join(figures) + "\n</body>")
    out.write_text(text)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--readme",
        nargs=2,
        metavar=("ANSWER_MD", "README"),
        help="copy ANSWER_MD's headline into README between its answer:headline markers (those after the line "
        "'<!-- headline of ANSWER_MD -->' where README has one, else the first)",
    )
    what.add_argument(
        "--report",
        nargs=2,
        metavar=("RUN", "OUT"),
        help="write OUT, one HTML file: RUN's page (RUN/answer.md) with the PNG figures it links embedded",
    )
    args = parser.parse_args(argv)
    if args.readme:
        update_readme(*args.readme)
    else:
        report(Path(args.report[0]), Path(args.report[1]))


if __name__ == "__main__":
    main()
