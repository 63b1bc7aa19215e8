rule corpus:
    output:
        "results/corpus/works.parquet",
    params:
        corpus=corpus_params(),
    log:
        "results/logs/corpus.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/corpus.py"


rule tokenizer:
    input:
        "results/corpus/works.parquet",
    output:
        "results/corpus/tokenizer.json",
    params:
        vocab_size=CONFIG["tokenizer"]["vocab_size"],
    log:
        "results/logs/tokenizer.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/tokenizer.py"


rule tokenize:
    input:
        works="results/corpus/works.parquet",
        tokenizer="results/corpus/tokenizer.json",
    output:
        "results/corpus/tokens.safetensors",
    log:
        "results/logs/tokenize.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/tokenize.py"
