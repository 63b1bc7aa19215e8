"""``hardware.compile``: the layers from the first trainable one up compiled (here with Dynamo's ``eager`` backend,
which traces and guards as ``inductor`` does but runs the same kernels) train to the same numbers over epochs whose
last batch is short, and leave the frozen tensors bit for bit."""

import copy

import torch
import torch._dynamo

from selfheal.heal import reset
from selfheal.training import loop, objectives, state
from selfheal.training.hardware import Hardware
from conftest import SPECIAL

TARGET = "L0"


def _run(model, adapter, train, val, compile_):
    model = copy.deepcopy(model)
    names = reset.target_names(model, adapter, TARGET, "full")
    reset.apply(model, adapter, names, "fresh", reset.generator_for(0, TARGET, "full"))
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if n not in names}
    s = state.Settings(
        lr=1e-2,
        batch_size=16,
        weight_decay=0.0,
        grad_clip=1.0,
        eval_every_examples=40,
        max_examples=3 * train.shape[0],  # three epochs, each ending on a batch of 8
        warmup_steps=2,
        optimizer="schedulefree",
        hardware=Hardware(device="cpu", compile=compile_),
    )
    result = loop.run(model, adapter, objectives.CausalLM(SPECIAL), train, val, set(names), s)
    return model, result, frozen


def test_compiled_layers_train_to_the_same_numbers(trained_model, adapter, sequences):
    train, val = sequences
    train = train[:88]
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    plain, plain_result, _ = _run(trained_model, adapter, train, val, None)
    compiled, result, frozen = _run(trained_model, adapter, train, val, "eager")
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0  # the layers did run compiled
    assert [p.val_loss for p in result.curve] == [p.val_loss for p in plain_result.curve]
    params = dict(compiled.named_parameters())
    for name, before in frozen.items():
        assert torch.equal(params[name], before), name
