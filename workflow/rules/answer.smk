# The answer: censoring-aware statistics over the three tables, the answer tables (results/answer/*.parquet), the
# page (answer.md; answer.html is the report's "Answer" category, listed first) and its figures.
import selfheal.analysis.answer
import selfheal.analysis.answer_plots

ANSWER_TABLES = selfheal.analysis.answer.TABLES
ANSWER_PLOTS = list(selfheal.analysis.answer_plots.FIGURES)
ANSWER_OUTPUTS = (
    expand(f"{RESULTS}/answer/{{table}}.parquet", table=ANSWER_TABLES)
    + [f"{RESULTS}/answer.md", f"{RESULTS}/answer.html"]
    + expand(f"{RESULTS}/plots/{{plot}}.{{ext}}", plot=ANSWER_PLOTS, ext=["html", "png"])
)


rule answer:
    input:
        summary=f"{RESULTS}/summary.parquet",
        curves=f"{RESULTS}/curves.parquet",
        networks=f"{RESULTS}/networks.parquet",
    output:
        tables=expand(f"{RESULTS}/answer/{{table}}.parquet", table=ANSWER_TABLES),
        md=f"{RESULTS}/answer.md",
        html=report(f"{RESULTS}/answer.html", caption="../report/answer.rst", category="1. Answer"),
        plots_html=[
            report(f"{RESULTS}/plots/{name}.html", caption=f"../report/{name}.rst", category="1. Answer")
            for name in ANSWER_PLOTS
        ],
        plots_png=expand(f"{RESULTS}/plots/{{name}}.png", name=ANSWER_PLOTS),
    log:
        f"{LOGS}/answer.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 2  # the scaling fit's bootstrap refits run in parallel (Snakemake gives fewer where --cores is lower)
    params:
        tables=ANSWER_TABLES,
        figures=ANSWER_PLOTS,
    script:
        "../scripts/answer.py"
