"""Data: the corpus (``corpus``), our BPE tokenizer (``tokenizer``), token streams and the fixed train/validation
sequences (``streams``)."""
