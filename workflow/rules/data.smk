rule corpus:
    output:
        f"{CORPUS}/works.parquet",
    log:
        f"{LOGS}/corpus.log",
    conda:
        "../../envs/training.yaml"
    params:
        corpus=corpus_params(),
    script:
        "../scripts/corpus.py"


rule tokenizer:
    input:
        f"{CORPUS}/works.parquet",
    output:
        f"{CORPUS}/tokenizer.json",
    log:
        f"{LOGS}/tokenizer.log",
    conda:
        "../../envs/training.yaml"
    params:
        vocab_size=CONFIG["tokenizer"]["vocab_size"],
    script:
        "../scripts/tokenizer.py"


rule tokenize:
    input:
        works=f"{CORPUS}/works.parquet",
        tokenizer=tokenizer_source,
    output:
        TOKENS,
    log:
        f"{LOGS}/tokenize-{{tokenizer}}.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/tokenize.py"
