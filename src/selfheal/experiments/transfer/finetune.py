"""Finetuning one spec of the pretrained encoder on one task, data size and trial, as Tamkin et al. 2020 do:
the whole model trains (AdamW, linear decay; lr 2e-5, batch 8, 3 epochs, 5 for 500 examples), then the held-out
test split is scored once (accuracy and MCC)."""

from __future__ import annotations

import logging
import math
import time

import pandas as pd
import torch

from sklearn.metrics import accuracy_score, matthews_corrcoef

from selfheal import models, packages, results_io
from selfheal.experiments.transfer import data, reinit
from selfheal.experiments.transfer.experiments import Spec
from selfheal.experiments.transfer.plan import epochs_for
from selfheal.models import families
from selfheal.training import setup, trainer
from selfheal.training.hardware import Hardware, to_device

log = logging.getLogger("selfheal")


def import_encoder(source: str, out_dir: str) -> dict:
    """Save the pretrained encoder (hub id, folder or package folder) as a plain safetensors folder with its
    tokenizer, so every job reads the same local copy. Pickled checkpoints are refused."""
    import transformers

    folder = packages.local_folder(source)
    if folder is not None:
        models.check_safetensors(folder)
    where = folder or source
    model = transformers.AutoModel.from_pretrained(where, use_safetensors=True, trust_remote_code=False)
    tokenizer = transformers.AutoTokenizer.from_pretrained(where, trust_remote_code=False)
    families.for_model(model)  # refuse a model no family adapter understands, before any finetuning job
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {
        "source": source,
        "model_type": model.config.model_type,
        "n_layer": model.config.num_hidden_layers,
        "params": models.parameter_count(model),
    }


def load_classifier(model_dir: str, labels: int):
    """The encoder with a sequence-classification head; returns (model, names of the new head's tensors)."""
    import transformers

    models.check_safetensors(model_dir)
    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        model_dir, num_labels=labels, use_safetensors=True, trust_remote_code=False, output_loading_info=True
    )
    return model, sorted(info["missing_keys"])


@torch.no_grad()
def predict(model, batches: list[dict], hw: Hardware, device) -> list[int]:
    model.eval()
    out = []
    for batch in batches:
        batch = to_device({k: v for k, v in batch.items() if k != "labels"}, device)
        with hw.autocast(device):
            out += model(**batch).logits.argmax(-1).tolist()
    return out


def run(
    settings: dict,
    task: str,
    size: int,
    trial: int,
    spec: dict,
    model_dir: str,
    train_path: str,
    test_path: str,
    out_path: str,
    hardware: dict | None = None,
    threads: int = 1,
) -> dict:
    import transformers

    setup.seed_everything(trial, threads)
    spec = Spec.from_dict(spec)
    pool, test = pd.read_parquet(train_path), pd.read_parquet(test_path)
    labels = data.num_labels(pool, test)
    examples_table = data.subsample(pool, size, trial)
    test = data.test_subset(test, settings["test_examples"])

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model, head = load_classifier(model_dir, labels)
    family = families.for_model(model)
    reinit.init_head(model, head, settings["init_std"], trial)
    reinitialised = set(reinit.apply(model, family, spec, settings["init"], settings["init_std"], trial))

    hw = Hardware.from_config(hardware)
    device = hw.prepare(model)
    params = dict(model.named_parameters())
    groups = [
        {"params": [params[n] for n in params if n not in reinitialised], "lr": settings["lr"]},
        {"params": [params[n] for n in sorted(reinitialised)], "lr": settings["lr"] * spec.reinit_lr_multiplier},
    ]
    # transformers.Trainer's AdamW betas; fused also on CPU, where the per-tensor loop over the word embeddings
    # would dominate the step.
    optimizer = hw.adamw(
        [g for g in groups if g["params"]], settings["lr"], betas=(0.9, 0.999), weight_decay=settings["weight_decay"]
    )

    examples = data.encode(tokenizer, examples_table, settings["max_length"])
    test_batches = data.batches(
        tokenizer, data.encode(tokenizer, test, settings["max_length"]), settings["eval_batch_size"]
    )
    epochs = epochs_for(settings, size)
    total = epochs * math.ceil(size / settings["batch_size"])
    schedule = trainer.linear_decay(round(settings["warmup_fraction"] * total), total)

    log.info(
        "finetune %s n=%d trial %d spec %s: %d labels, %d epochs, %d steps, %d tensors re-initialised",
        task,
        size,
        trial,
        spec.id,
        labels,
        epochs,
        total,
        len(reinitialised),
    )
    # Counted up front rather than per step, so the loop never waits on the device for it.
    tokens = epochs * sum(len(e["input_ids"]) for e in examples)
    epoch_losses: list[float] = []
    losses: list[torch.Tensor] = []

    def batches():
        for epoch in range(epochs):
            model.train()
            yield from (
                to_device(b, device)
                for b in data.batches(tokenizer, examples, settings["batch_size"], data.epoch_order(size, trial, epoch))
            )
            epoch_losses.append(float(torch.stack(losses).mean()))
            losses.clear()
            log.info("epoch %d: mean train loss %.4f", epoch + 1, epoch_losses[-1])

    def loss_of(batch) -> torch.Tensor:
        with hw.autocast(device):
            return model(**batch).loss

    def keep_loss(info: trainer.StepInfo) -> bool:
        losses.append(info.loss.detach())
        return False

    start = time.perf_counter()
    trainer.train(
        optimizer,
        batches(),
        loss_of,
        schedule,
        settings["grad_clip"] or 0.0,
        list(model.parameters()),
        on_step=keep_loss,
    )
    train_s = time.perf_counter() - start
    predictions = predict(model, test_batches, hw, device)
    truth = test["label"].tolist()
    out = {
        "task": task,
        "size": size,
        "trial": trial,
        "spec": spec.id,
        **spec.as_dict(),
        "init": settings["init"],
        "labels": labels,
        "epochs": epochs,
        "steps": total,
        "train_loss": epoch_losses,
        "test_examples": len(truth),
        "accuracy": float(accuracy_score(truth, predictions)),
        "mcc": float(matthews_corrcoef(truth, predictions)),
        "train_s": train_s,
        "train_tokens_per_s": tokens / train_s,
        "device": str(device),
        "reinit_tensors": len(reinitialised),
    }
    results_io.write_json(out_path, out)
    log.info(
        "test accuracy %.4f, MCC %.4f (%d examples); %.1f s training", out["accuracy"], out["mcc"], len(truth), train_s
    )
    return out
