"""Tamkin et al. 2020, "Investigating Transferability in Pretrained Language Models", on packaged data.

A pretrained encoder (all-MiniLM-L6-v2 by default) is partly re-initialised, permuted or probed, then finetuned on
classification tasks (``tasks``). ``experiments`` builds the cells, ``reinit`` applies them to a model, ``finetune``
and ``probing`` run them, ``tables`` aggregates scores with t-intervals, ``plots`` draws Figures 2-4 of the paper.
"""
