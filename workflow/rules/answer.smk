# The answer: censoring-aware statistics over the three tables, the answer tables (results/answer/*.parquet), the
# page (answer.md; answer.html is the report's "Answer" category, listed first) and its figures.
import selfheal.analysis.answer
import selfheal.analysis.answer_plots

ANSWER_TABLES = selfheal.analysis.answer.TABLES
ANSWER_PLOTS = list(selfheal.analysis.answer_plots.FIGURES)
LEFT_OUT_TABLES = [LEFT_OUT_TABLE] if PARTIAL else []
ANSWER_OUTPUTS = (
    expand(f"{READOUT}/answer/{{table}}.parquet", table=ANSWER_TABLES)
    + [f"{READOUT}/answer.md", f"{READOUT}/answer.html"]
    + expand(f"{READOUT}/plots/{{plot}}.{{ext}}", plot=ANSWER_PLOTS, ext=["html", "png"])
)


rule answer:
    input:
        summary=f"{READOUT}/summary.parquet",
        curves=f"{READOUT}/curves.parquet",
        networks=f"{READOUT}/networks.parquet",
        lr_sensitivity=LR_SENSITIVITY_TABLES,  # only where retrain.lr_sensitivity is on
        left_out=LEFT_OUT_TABLES,  # only with partial: true
    output:
        tables=expand(f"{READOUT}/answer/{{table}}.parquet", table=ANSWER_TABLES),
        md=f"{READOUT}/answer.md",
        html=report(f"{READOUT}/answer.html", caption="../report/answer.rst", category="1. Answer"),
        plots_html=[
            report(f"{READOUT}/plots/{name}.html", caption=f"../report/{name}.rst", category="1. Answer")
            for name in ANSWER_PLOTS
        ],
        plots_png=expand(f"{READOUT}/plots/{{name}}.png", name=ANSWER_PLOTS),
    log:
        f"{READOUT_LOGS}/answer.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 2  # the scaling fit's bootstrap refits run in parallel (Snakemake gives fewer where --cores is lower)
    params:
        tables=ANSWER_TABLES,
        figures=ANSWER_PLOTS,
    script:
        "../scripts/answer.py"


# partial: true: what the page's readout of a study still running leaves out (selfheal.partial), as a table it reads.
rule left_out:
    output:
        LEFT_OUT_TABLE,
    log:
        f"{READOUT_LOGS}/left_out.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        left_out=PARTIAL.left_out if PARTIAL else [],
        lr_left_out=PARTIAL.lr_left_out if PARTIAL else [],
        networks_left_out=[list(n) for n in NETWORKS_LEFT_OUT],
    script:
        "../scripts/left_out.py"
