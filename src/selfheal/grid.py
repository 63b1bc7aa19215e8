"""The grid's run-time vocabulary: targets and cells.

A *target* is what a cell resets, spelled in paths and tables as ``L<i>`` (a layer of a single-stack model),
``enc.<i>`` / ``dec.<i>`` (a layer of an encoder-decoder), ``all`` / ``enc`` / ``dec`` (a set of layers),
``swap<w>`` (the encoder swapped for a fresh one of width w), ``swap-<model>`` (the encoder swapped for the trained
encoder of another encoder-decoder model of the config, its donor) or ``none`` (the no-reset control). It is parsed
in one place, ``Target.parse``, and the Snakemake wildcard constraint is generated from the same pattern.

A *network* is one pretrained network of a model size: a model and a pretraining seed (``pretrain.seeds``); each
has its own step-0 weights, trained weights, baseline and cells. ``network_config`` gives its settings.

A *cell* is one retrain run: model, pretraining seed, target, policy, init, regime and (retrain) seed.
``cells(config)`` expands a resolved config's grid (and its controls) into cells in a stable order. Init
``trained`` is the *matched no-reset control* of a layer cell: the same tensors train from their trained values.
"""

from __future__ import annotations

import copy
import re
from dataclasses import astuple, dataclass, fields

from selfheal.models.families import FAMILIES

NONE = "none"  # the no-reset control
ALL = "all"  # every layer (the from-scratch comparison)
SWAP = "swap"  # encoder swap prefix: swap<width> (a fresh encoder), swap-<model> (a donor's trained encoder)
TRAINED = "trained"  # init of the matched no-reset control: the cell's tensors train from their trained values
ZERO_OUT = "zero_out"  # a fresh draw with the output projections at zero: the layer starts as deleted
INITS = ("fresh", "original", ZERO_OUT)  # the inits a config names (grid.inits)
NO_OUTPUT_PROJECTION = ("ln", "embeddings")  # policies that reset no output projection: no zero_out cells
STACKS = ("enc", "dec")

# kinds of target
LAYER, SET, SWAP_KIND, NONE_KIND = "layer", "set", "swap", "none"

_LAYER = r"L(?P<single>[0-9]+)|(?P<stack>enc|dec)[.](?P<index>[0-9]+)"
_SET = r"(?P<set>all|enc|dec)"
_SWAP = r"swap(?P<width>[0-9]+)|swap-(?P<donor>[A-Za-z0-9_.-]+)"
_NONE = r"(?P<none>none)"
PATTERN = f"{_LAYER}|{_SET}|{_SWAP}|{_NONE}"
_FULL = re.compile(f"^(?:{PATTERN})$")
# The same pattern without named groups, for Snakemake's wildcard_constraints.
WILDCARD = re.sub(r"\(\?P<[a-z]+>", "(", PATTERN)


@dataclass(frozen=True)
class Target:
    """A parsed target. ``stack`` is '' for a layer of a single-stack model, 'enc'/'dec' for an encoder-decoder
    layer or a stack set, None otherwise; ``index`` is the layer's index within its stack (None unless a layer);
    ``width`` a fresh swapped encoder's width and ``donor`` the model whose trained encoder is swapped in (None
    unless a swap)."""

    text: str
    kind: str
    stack: str | None = None
    index: int | None = None
    width: int | None = None
    donor: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Target":
        m = _FULL.match(text)
        if m is None:
            raise ValueError(
                f"not a target: {text!r} (expected L<i>, enc.<i>, dec.<i>, all, enc, dec, swap<w>, swap-<model> or none)"
            )
        if m["single"] is not None:
            return cls(text, LAYER, "", int(m["single"]))
        if m["stack"] is not None:
            return cls(text, LAYER, m["stack"], int(m["index"]))
        if m["set"] is not None:
            return cls(text, SET, None if m["set"] == ALL else m["set"])
        if m["width"] is not None:
            return cls(text, SWAP_KIND, width=int(m["width"]))
        if m["donor"] is not None:
            return cls(text, SWAP_KIND, donor=m["donor"])
        return cls(text, NONE_KIND)

    @classmethod
    def of(cls, value: "Target | str") -> "Target":
        """A Target as it is, or a target's text parsed."""
        return value if isinstance(value, Target) else cls.parse(value)

    @property
    def is_layer(self) -> bool:
        return self.kind == LAYER

    def depth(self, model_cfg: dict) -> int | None:
        """Global position of a one-layer target in a configured model (encoder first); None otherwise."""
        if not self.is_layer:
            return None
        return self.index if self.stack == "" else layer_ids(model_cfg).index(self.text)

    def members(self, all_ids: list[str]) -> list[str]:
        """The layer ids this target resets, among a model's layer ids (in depth order)."""
        if self.kind == LAYER:
            return [self.text]
        if self.kind == SET:
            return list(all_ids) if self.stack is None else [i for i in all_ids if i.startswith(f"{self.stack}.")]
        return []

    def __str__(self) -> str:
        return self.text


def layer_ids(model: dict) -> list[str]:
    """Every layer id of a configured model, in depth order (encoder first)."""
    if FAMILIES[model["arch"]].stacks == STACKS:
        n_dec = model.get("n_dec_layer") or model["n_layer"]
        return [f"enc.{i}" for i in range(model["n_layer"])] + [f"dec.{i}" for i in range(n_dec)]
    return [f"L{i}" for i in range(model["n_layer"])]


def layer_id(layer) -> str:
    """A grid.layers entry as a layer id: integers index single-stack models (the encoder of an encoder-decoder
    would be ambiguous, so they are written enc.i / dec.i there)."""
    return f"L{layer}" if isinstance(layer, int) else layer


def policy_applies(arch: str, layer: str, policy: str) -> bool:
    """Whether a layer policy names any tensor of a layer of this family (cross_attn only in decoder layers)."""
    if policy in ("full", "attn"):
        return True
    stack = Target.parse(layer).stack
    return bool(FAMILIES[arch].components[stack].get(policy))


@dataclass(frozen=True)
class Cell:
    """One retrain run of the grid."""

    model: str
    target: str
    policy: str
    init: str
    regime: str
    seed: int
    pretrain_seed: int = 0

    @property
    def parsed_target(self) -> Target:
        return Target.parse(self.target)

    @property
    def is_matched_control(self) -> bool:
        """Trains without a reset, to show what training alone does: init 'trained' cells, and in regime full
        (where every tensor trains whatever the target) the 'none' control."""
        return self.init == TRAINED or (self.target == NONE and self.regime == "full")

    def matches(self, cell: "Cell") -> bool:
        """Whether this matched control trains the same tensors, data order and schedule as ``cell``."""
        if not self.is_matched_control or cell.is_matched_control or self.unit != cell.unit or self.seed != cell.seed:
            return False
        return self.target == NONE or (self.target, self.policy) == matched_control_of(cell.target, cell.policy)

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "pretrain_seed": self.pretrain_seed,
            "target": self.target,
            "policy": self.policy,
            "init": self.init,
            "regime": self.regime,
            "seed": self.seed,
        }

    @property
    def unit(self) -> "Unit":
        return Unit(self.model, self.regime, self.pretrain_seed)


@dataclass(frozen=True)
class Unit:
    """A heal unit: every cell of one network (model and pretraining seed) and retrain regime, all retrain seeds,
    healed together (the trained model, data and prefix caches loaded once; ``heal.unit``) inside its network's job
    (``heal.job``). A re-run keeps the cells it finished before whose inputs and settings are
    unchanged and trains only the new ones."""

    model: str
    regime: str
    pretrain_seed: int = 0


@dataclass(frozen=True)
class Network:
    """One pretrained network: a model size and a pretraining seed."""

    model: str
    pretrain_seed: int


def networks(config: dict, models: list[dict] | None = None) -> list[Network]:
    """Every (model, pretraining seed) of ``models`` (default: the grid's models), in a stable order."""
    return [
        Network(m["name"], s) for m in (config["models"] if models is None else models) for s in m["pretrain"]["seeds"]
    ]


# What a fingerprint covers: the settings a staged piece (``heal.staging``) and a job's recorded params depend on are
# a model's settings but the keys named here ("section.key", or a whole section), so editing a key left out keeps the
# piece. Every piece leaves out the network's seed list (adding a seed never changes an existing network), the
# lr-sensitivity side measurement and whether the grid heals the model; a made network leaves out its retrain
# settings; a healed cell its budget and stall stop (a cell staged under another budget is kept or continued,
# ``heal.unit``). A downloaded model's import covers only the keys that identify its checkpoint.
_NO_PIECE = ("pretrain.seeds", "heal")
NOT_COVERED = {
    "job": _NO_PIECE,  # a network job's settings (network_config), its recorded params
    "network": (*_NO_PIECE, "retrain"),
    "cell": (*_NO_PIECE, "retrain.budget_fraction", "retrain.budget_scratch", "retrain.stop_stalled"),
}
IMPORT_COVERS = ("name", "source", "name_or_path", "gguf_file", "arch", "n_layer", "n_dec_layer")


def covered(piece: str, settings: dict) -> dict:
    """The part of a model's (or a network's) ``settings`` that the fingerprint of ``piece`` covers: ``import``, or a
    key of ``NOT_COVERED``."""
    if piece == "import":
        return {k: settings[k] for k in IMPORT_COVERS if k in settings}
    out = copy.deepcopy(settings)
    for key in NOT_COVERED[piece]:
        section, _, name = key.rpartition(".")
        (out.get(section, {}) if section else out).pop(name, None)
    return out


def network_config(model_cfg: dict, pretrain_seed: int) -> dict:
    """A model's settings for one of its networks, as its job gets them: ``pretrain.seed`` set to the pretraining
    seed (it draws the step-0 weights, the S training sequences and their order), without the keys no fingerprint
    covers (``NOT_COVERED["job"]``)."""
    cfg = covered("job", model_cfg)
    cfg["pretrain"]["seed"] = pretrain_seed
    return cfg


def matched_control_of(target: str, policy: str) -> tuple[str, str] | None:
    """The (target, policy) of the matched no-reset control (init ``trained``) of a reset cell of ``target`` and
    ``policy``, or None: a layer or a set of layers trains the same tensors from their trained values; an encoder
    swap whose encoder stays frozen (policy cross_attn) trains only the cross-attention, so its control is every
    decoder layer's cross-attention (``all``, cross_attn); a swap whose encoder trains too, the reset-all control and
    the no-reset control have none."""
    kind = Target.parse(target).kind
    if kind == LAYER or (kind == SET and (target, policy) != (ALL, "full")):
        return target, policy
    if kind == SWAP_KIND and policy == "cross_attn":
        return ALL, "cross_attn"
    return None


def units(cells: list[Cell]) -> list[Unit]:
    return list(dict.fromkeys(c.unit for c in cells))


def cells_of(cells: list[Cell], unit: Unit) -> list[Cell]:
    return [c for c in cells if c.unit == unit]


def model_by_name(config: dict, name: str) -> dict:
    """A model of ``models``."""
    for model in config["models"]:
        if model["name"] == name:
            return model
    raise KeyError(name)


def tokenizer_keys(models: list[dict]) -> dict[str, str]:
    """Per model, whose token streams it trains and evaluates on: ``bpe`` (our BPE) for a model pretrained here; for a
    downloaded model, the first model in the config read from the same checkpoint (its ``name_or_path`` and
    ``gguf_file``), whose tokenizer it shares, so two models of one checkpoint (e.g. adapted and as downloaded)
    tokenize the corpus once."""
    keys, owner = {}, {}
    for m in models:
        if m.get("source") != "pretrained":
            keys[m["name"]] = "bpe"
            continue
        checkpoint = (str(m.get("name_or_path")), str(m.get("gguf_file")))
        keys[m["name"]] = owner.setdefault(checkpoint, m["name"])
    return keys


def cells(config: dict) -> list[Cell]:
    """Expand the grid (and its controls) into cells, in a stable order. A policy that a layer lacks (cross_attn
    on a decoder-only model or an encoder layer) makes no cell; model-level policies (embeddings) make one cell
    with target 'all'; a model with ``heal: false`` makes none."""
    grid = config["grid"]
    out: list[Cell] = []
    for model in config["models"]:
        if not model.get("heal", True):
            continue  # pretrained only (an encoder swap's donor)
        for pretrain_seed in model["pretrain"]["seeds"]:
            out += _network_cells(grid, model, pretrain_seed)
    return list(dict.fromkeys(out))  # a set target may repeat a control; keep the first


def _network_cells(grid: dict, model: dict, pretrain_seed: int) -> list[Cell]:
    out: list[Cell] = []
    all_ids = layer_ids(model)
    chosen = all_ids if grid["layers"] == "all" else [layer_id(l) for l in grid["layers"]]
    stacks = sorted({i.split(".")[0] for i in all_ids if "." in i})
    targets = chosen + [t for t in grid.get("targets", []) if t == ALL or t in stacks]  # layers, then sets
    matched = grid["matched_controls"]

    def applies(target: str, policy: str) -> bool:  # the policy names a tensor of one of the target's layers
        return any(policy_applies(model["arch"], m, policy) for m in Target.parse(target).members(all_ids))

    for seed in grid["seeds"]:
        # the matched no-reset control: every retrain seed, or only the first of each network
        with_matched = matched == "all_seeds" or (matched == "first_seed" and seed == grid["seeds"][0])
        for regime in grid["regimes"]:
            cell = _cell_maker(model["name"], regime, seed, pretrain_seed)
            for policy in grid["policies"]:
                for init in grid["inits"]:
                    if init == ZERO_OUT and policy in NO_OUTPUT_PROJECTION:
                        continue  # nothing to zero: its cells would be the fresh ones
                    if policy == "embeddings":
                        out.append(cell(ALL, policy, init))
                        continue
                    out += [cell(target, policy, init) for target in targets if applies(target, policy)]
                # (in regime full every tensor trains whatever the target: the 'none' control is its matched control)
                if with_matched and policy != "embeddings" and regime != "full":
                    out += [
                        cell(target, policy, TRAINED)
                        for target in targets
                        if matched_control_of(target, policy) is not None and applies(target, policy)
                    ]
            if len(stacks) == 2:
                swaps = _swap_cells(grid, model, cell)
                out += swaps
                if with_matched and regime != "full":  # the cross-attention's control, for the frozen-encoder swaps
                    out += [
                        cell(*control, TRAINED)
                        for control in dict.fromkeys(matched_control_of(s.target, s.policy) for s in swaps)
                        if control is not None
                    ]
            if grid["controls"]:
                # "none" has nothing to reset: policy and init are 'none' so it runs once per regime and seed.
                out.append(cell(NONE, "none", "none"))
                out += [cell(ALL, "full", init) for init in grid["inits"]]
    return out


SWAP_INITS = ("fresh", ZERO_OUT)  # a swap's cross-attention is a fresh draw, or one whose output starts at zero
STITCH = "stitch"  # a donor's encoder frozen behind a learned linear map, the cross-attention kept
# a donor's encoder trains with the wiped cross-attention, stays frozen while it trains, or is stitched in
DONOR_POLICIES = ("full", "cross_attn", STITCH)


def swap_targets(grid: dict, model: dict) -> list[str]:
    """The encoder swaps of an encoder-decoder model: ``swap<w>`` per width of ``grid.encoder_swap``, and
    ``swap-<donor>`` per model name there, except in the donors themselves (a donor receives no donor's encoder, so
    no two networks wait for each other)."""
    entries = grid["encoder_swap"]
    if model["name"] in entries:
        return [f"{SWAP}{e}" for e in entries if isinstance(e, int)]
    return [f"{SWAP}{e}" if isinstance(e, int) else f"{SWAP}-{e}" for e in entries]


def _swap_cells(grid: dict, model: dict, cell) -> list["Cell"]:
    """A fresh encoder trains with the wiped cross-attention (policy full); a donor's trained encoder either trains
    with it (full) or stays frozen while only the cross-attention trains (cross_attn). Each twice, whatever
    ``grid.inits``: the cross-attention drawn fresh, and with its output at zero (``zero_out``: a closed gate, as
    Flamingo's, so the decoder starts as it would without an encoder). A donor's encoder is also stitched in
    (``stitch``: frozen behind a learned linear map into the model's width, drawn fresh, the cross-attention kept
    and frozen), so that a foreign encoder and a wiped cross-attention are measured apart."""
    out = []
    for target in swap_targets(grid, model):
        if Target.parse(target).donor is None:
            out += [cell(target, "full", init) for init in SWAP_INITS]
            continue
        out += [cell(target, policy, init) for policy in DONOR_POLICIES[:2] for init in SWAP_INITS]
        out.append(cell(target, STITCH, "fresh"))
    return out


def donor_network(config: dict, donor: str, pretrain_seed: int) -> Network:
    """The network whose trained encoder a receiving network of ``pretrain_seed`` gets: the donor's network of the
    same pretraining seed, or the donor's first network when it has no such seed."""
    seeds = model_by_name(config, donor)["pretrain"]["seeds"]
    return Network(donor, pretrain_seed if pretrain_seed in seeds else seeds[0])


def donors(cells: list["Cell"]) -> list[str]:
    """The donor models whose encoders ``cells`` swap in, in order."""
    return list(dict.fromkeys(d for c in cells if (d := c.parsed_target.donor) is not None))


def _cell_maker(model: str, regime: str, seed: int, pretrain_seed: int):
    return lambda target, policy, init: Cell(model, target, policy, init, regime, seed, pretrain_seed)


def wildcard_constraints(schema: dict) -> dict[str, str]:
    """The rules' wildcard constraints of policy, init and regime (``workflow/rules/common.smk``): the values the
    config schema allows for the grid's policies, inits and regimes, and the controls' (policy and init ``none``,
    init ``trained``). The schema is passed in (config imports this module)."""
    grid = schema["properties"]["grid"]["properties"]
    allowed = {
        key: list(grid[keys]["items"]["enum"])
        for key, keys in (("policy", "policies"), ("init", "inits"), ("regime", "regimes"))
    }
    allowed["policy"] += [NONE, STITCH]
    allowed["init"] += [TRAINED, NONE]
    return {key: one_of(values) for key, values in allowed.items()}


def one_of(names: list[str]) -> str:
    """A wildcard constraint matching exactly these names (and nothing when there are none)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def columns(records: list) -> dict[str, list]:
    """Dataclass records as one list per field, for ``expand(pattern, zip, **columns(records))`` in the rules."""
    if not records:
        return {}
    names = [f.name for f in fields(records[0])]
    return {name: [astuple(r)[i] for r in records] for i, name in enumerate(names)}
