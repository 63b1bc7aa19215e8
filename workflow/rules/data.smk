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


def tokenizer_source(wildcards):
    if wildcards.tokenizer == "bpe":
        return "results/corpus/tokenizer.json"
    return f"results/pretrained/{wildcards.tokenizer}/trained"


rule tokenize:
    input:
        works="results/corpus/works.parquet",
        tokenizer=tokenizer_source,
    output:
        "results/corpus/{tokenizer}/tokens.safetensors",
    log:
        "results/logs/tokenize-{tokenizer}.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/tokenize.py"
