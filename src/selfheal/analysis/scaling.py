"""How the cost of healing one layer scales with its position, N, D and the family: a censoring-aware regression,
and whether the damage a reset does predicts its cost.

- ``fit``: per setting (regime, policy, init) and threshold, a log-normal accelerated-failure-time model of the
  single-layer cells' cost interval (lifelines ``LogNormalAFTFitter.fit_interval_censoring``: interval-censored
  crossings, right-censored at the budget), log cost = b0 + b1 [first layer] + b2 [last layer] + b3 depth among the
  middle layers + b4 log N + b5 log D + family terms + noise, with cluster-bootstrap intervals over pretrained
  networks. When a term is reported as not determined (never as zero) and why (``REASONS``), and how the intervals
  are formed: docs/method.md and docs/outputs.md; tests/test_intervals.py measures their coverage.
- ``damage_cost``: Spearman's rank correlation, across single-layer cells, between the zero-step damage (loss right
  after the reset minus the baseline) and the cost; censored cells rank above every recovered one (their cost
  exceeds the budget, the largest cost seen), with the same cluster-bootstrap interval.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import math

import numpy as np
import pandas as pd

from selfheal.analysis import stats as stats_
from selfheal.analysis import survival
from selfheal.lazy import Module

# imported at first use: the Snakefile imports the answer rule's module at every start
optimize = Module("scipy.optimize")
special = Module("scipy.special")
stats = Module("scipy.stats")

TERMS = ["first_layer", "last_layer", "middle_depth", "log_n_layer", "log_d_model", "log_train_sequences", "log_epochs"]
TERM_LABELS = {
    "first_layer": "the first layer (vs. the middle layers)",
    "last_layer": "the last layer (vs. the middle layers)",
    "middle_depth": "depth among the middle layers, from the second layer to the second-to-last",
    "log_n_layer": "log N (layers)",
    "log_d_model": "log D (width)",
    "log_train_sequences": "log S (pretraining sequences)",
    "log_epochs": "log E (pretraining epochs)",
}
# The first-layer term's label where no fitted network has a middle layer (every one has N <= 2): the term then
# compares the first layer with the last, and the last-layer term is confounded with the intercept.
FIRST_VS_LAST = "the first layer (vs. the last: no middle layers)"
FIT_COLUMNS = [
    *survival.SETTING,
    "threshold",
    "term",
    "label",
    "determined",
    "reason",
    "note",
    "coef",
    "coef_lo",
    "coef_hi",
    "factor",
    "factor_lo",
    "factor_hi",
    "unit",
    "n_cells",
    "n_censored",
    "n_clusters",
    "n_resamples",
    "n_failed",
    "interval_over",
    "left_out",
    "n_left_out",
]
# Why a term is not determined (the fit table's ``reason``; "" when it is): the code other modules branch on, the
# ``note`` beside it says it in words with the numbers.
REASONS = {
    "not_varied": "the grid does not vary it",
    "confounded": "the grid confounds it with another term",
    "censored": "every cell that would measure it is beyond the budget, so those cells are left out of the fit",
    "unbounded": "every cell that would bound it is beyond the budget (its coefficient is unbounded)",
    "unmatched_family": "no network of its family shares S × E with the reference family's (its cells are left out)",
    "unstable": "its refits on resampled networks centre far from the estimate",
    "all_censored": "every cell is beyond the budget",
    "mostly_free": "most cells were within ε before any training",
    "too_few_cells": "too few cells for the fit's parameters",
    "saturated": "one model, with no more layer positions than the fit has coefficients: it would only restate the "
    "per-layer costs",
    "not_converged": "the fit did not converge",
}
DAMAGE_COLUMNS = [
    *survival.SETTING,
    "threshold",
    "rho",
    "rho_lo",
    "rho_hi",
    "n_cells",
    "n_censored",
    "n_clusters",
    "n_resamples",
    "interval_over",
    "note",
]
# A fit needs at least this many (non-zero-cost) cells per parameter, and is not made when more than this share
# of the single-layer cells cost nothing at that eps (within eps before any training: the cost of the rest is then
# a question about a few cells).
MIN_CELLS_PER_PARAMETER = 2
MAX_SHARE_AT_ZERO = 0.5
# A term is unstable when its refits centre further from its estimate than both this many standard errors and this
# share of the estimate: the estimate moves materially from one set of networks to another.
UNSTABLE_BIAS = 2.0
UNSTABLE_SHARE = 0.25
INDICATORS = ("first_layer", "last_layer")  # 0/1 terms: unbounded when every cell they mark is censored (_away)
UNBOUNDED_TOL = 1e-7  # a term moves along a direction of rising likelihood when |d_j| exceeds this (scaled)
MAX_FIT_RESAMPLES = 200  # bootstrap refits of the fit (each a BFGS run from the full fit)
MAX_RANK_RESAMPLES = 500


def _layer_cells(cells: pd.DataFrame) -> pd.DataFrame:
    rows = survival.estimable(cells)
    return rows[rows["kind"] == survival.LAYER].copy()


def cost_unit(rows: pd.DataFrame) -> str:
    """The cells' cost unit (``stats.cost_unit``; the cells carry their network's source)."""
    return stats_.cost_unit(rows, networks=rows)


def _bounds(rows: pd.DataFrame, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Cost interval in the unit. A log-cost model needs positive bounds: a cost of exactly 0 (within eps at the
    first evaluation) is taken as below one example, and a lower bound of 0 (crossed before the first evaluation
    after 0) as 1e-6 of the upper bound, which is left-censoring up to a negligible probability."""
    upper = np.where(rows["upper"].to_numpy(float) == 0, 1.0, rows["upper"].to_numpy(float))
    lower = rows["lower"].to_numpy(float)
    lower = np.where(lower > 0, lower, 1e-6 * np.where(np.isfinite(upper), upper, 1.0))
    if unit == "fraction":
        scale = rows["pretrain_examples"].astype(float).to_numpy()
        lower, upper = lower / scale, upper / scale
    return lower, upper


def _design(rows: pd.DataFrame) -> pd.DataFrame:
    """The fit's columns. The layer's position is three terms: the first and the last layer, each against the
    middle layers, and the depth among the middle layers (``survival.middle_depth``: centred, so it does not move
    what the first and last layer are compared with). A single trend over relative depth with first- and
    last-layer terms on top of it leans the trend on the few middle layers of shallow networks (at N = 3 and 4,
    three positions): the trend extrapolated to the first and the last layer swings, and their terms swing against
    it (on the reference study's first cells, intervals of twenty orders of magnitude at ε = 0.01)."""
    x = pd.DataFrame(index=rows.index)
    x["first_layer"] = rows["position"].isin(["first", "only"]).astype(float)
    x["last_layer"] = rows["position"].isin(["last", "only"]).astype(float)
    x["middle_depth"] = rows["middle_depth"].astype(float).fillna(0.0)
    x["log_n_layer"] = np.log(rows["n_layer"].astype(float))
    x["log_d_model"] = np.log(rows["d_model"].astype(float))
    for term, column in (("log_train_sequences", "train_sequences"), ("log_epochs", "epochs")):
        if column in rows and rows[column].notna().all():  # S and E of networks pretrained here
            x[term] = np.log(rows[column].astype(float))
    kinds = sorted(rows["family_kind"].astype(str).unique())
    reference = rows["family_kind"].astype(str).value_counts().idxmax() if len(rows) else None
    for kind in kinds:
        if kind != reference:
            x[f"family[{kind}]"] = (rows["family_kind"].astype(str) == kind).astype(float)
    return x


def identifiable(x: pd.DataFrame) -> tuple[list[str], dict[str, str]]:
    """Terms kept (each raises the rank of [intercept, terms kept before it]) and, for the others, why not. The
    family terms are looked at before the size and data terms (log N, D, S, E): a size that only another family
    varies (a BART of width 96 beside GPT-2s of width 64) is that family's difference, not a trend in D, so the size
    term is the one confounded. The kept terms are returned in x's column order."""
    kept, why = [], {}
    base = np.ones((len(x), 1))
    rank = np.linalg.matrix_rank(base)
    for term in sorted(x.columns, key=lambda t: t.startswith("log_")):  # stable: positions, families, then sizes
        column = x[term].to_numpy(float)
        if len(column) == 0 or np.ptp(column) == 0:
            why[term] = ("not_varied", "not determined by this grid: it does not vary")
            continue
        trial = np.column_stack([base, column])
        if np.linalg.matrix_rank(trial) > rank:
            base, rank = trial, rank + 1
            kept.append(term)
        else:
            why[term] = (
                "confounded",
                f"not determined by this grid: confounded with {', '.join(kept) or 'the intercept'}",
            )
    return [t for t in x.columns if t in kept], why


_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
# a fitted log-normal scale below this (in log cost) is the likelihood running off: every cell at one cost
MIN_SIGMA = 1e-3
GRADIENT_TOLERANCE = 1e-5  # the mean log-likelihood's gradient norm at which a fit has converged


def _log_likelihood(theta: np.ndarray, design: np.ndarray, log_lo, log_hi, exact, weights) -> tuple[float, np.ndarray]:
    """The mean (weighted) log-likelihood of the log-normal AFT and its gradient: log T ~ Normal(design @ beta,
    exp(log_sigma)^2), theta = (beta, log_sigma). A cost known exactly contributes its density; any other its
    probability between its bounds (log_lo = -inf: below the upper bound; log_hi = inf: beyond the budget), computed
    on the side of the normal where it does not underflow."""
    beta, log_sigma = theta[:-1], theta[-1]
    sigma = math.exp(log_sigma)
    mu = design @ beta
    a, b = (log_lo - mu) / sigma, (log_hi - mu) / sigma
    ll = np.empty_like(mu)
    d_mu = np.empty_like(mu)  # d ll / d mu
    d_ls = np.empty_like(mu)  # d ll / d log sigma
    z = a[exact]
    ll[exact] = -log_sigma - _LOG_SQRT_2PI - 0.5 * z**2 - log_lo[exact]
    d_mu[exact], d_ls[exact] = z / sigma, z**2 - 1.0
    interval = ~exact
    a_, b_ = a[interval], b[interval]
    upper_side = (a_ + b_) > 0  # both bounds high: P = Phi(-a) - Phi(-b), on the other side of the normal
    lo_, hi_ = np.where(upper_side, -b_, a_), np.where(upper_side, -a_, b_)
    log_hi_cdf, log_lo_cdf = special.log_ndtr(hi_), special.log_ndtr(lo_)
    log_p = log_hi_cdf + np.log1p(-np.exp(np.minimum(log_lo_cdf - log_hi_cdf, 0.0)))
    ll[interval] = log_p

    def pdf_over_p(v):  # phi(v) / P, 0 at an infinite bound
        out = np.zeros_like(v)
        finite = np.isfinite(v)
        out[finite] = np.exp(-0.5 * v[finite] ** 2 - _LOG_SQRT_2PI - log_p[finite])
        return out

    ra, rb = pdf_over_p(a_), pdf_over_p(b_)
    a_term = np.where(np.isfinite(a_), a_, 0.0) * ra  # an infinite bound adds nothing (its density is 0)
    b_term = np.where(np.isfinite(b_), b_, 0.0) * rb
    d_mu[interval] = -(rb - ra) / sigma
    d_ls[interval] = -(b_term - a_term)
    total = weights.sum()
    value = float((weights * ll).sum() / total)
    grad = np.concatenate([design.T @ (weights * d_mu), [(weights * d_ls).sum()]]) / total
    return value, grad


def _aft(
    x: pd.DataFrame,
    lower: np.ndarray,
    upper: np.ndarray,
    weights: np.ndarray | None = None,
    start: pd.Series | None = None,
) -> pd.Series | None:
    """The log-normal accelerated-failure-time fit of interval-censored costs by maximum likelihood: log cost ~
    Normal(intercept + x @ coefficients, sigma). Returns the parameters as lifelines' LogNormalAFTFitter names them
    (``("mu_", term)`` for each term in name order, then ``("mu_", "Intercept")`` and ``("sigma_", "Intercept")``,
    the log of sigma), or None when the fit does not converge (the likelihood runs off, e.g. every cell at one
    exact cost, where sigma shrinks to 0). ``start``: the parameters to start from (a bootstrap refit starts from
    the full fit). Written here rather than called from lifelines, whose fit is too slow for the hundreds of refits
    of a fit table (``tests/test_survival.py`` checks they agree)."""
    terms = sorted(x.columns)
    keep = np.ones(len(x), dtype=bool) if weights is None else np.asarray(weights) > 0
    w = np.ones(int(keep.sum())) if weights is None else np.asarray(weights, dtype=float)[keep]
    lo, hi = np.asarray(lower, dtype=float)[keep], np.asarray(upper, dtype=float)[keep]
    values = x[terms].to_numpy(float)[keep]
    scale = values.std(axis=0, ddof=1) if len(values) > 1 else np.ones(len(terms))
    scale = np.where(np.isfinite(scale) & (scale >= 1e-8), scale, 1.0)  # the optimiser works on standardised terms
    design = np.column_stack([values / scale, np.ones(len(values))])
    with np.errstate(divide="ignore"):
        log_lo, log_hi = np.log(lo), np.log(hi)
    exact = np.isfinite(log_lo) & (lo == hi)
    if start is not None:
        theta0 = np.array(
            [float(start[("mu_", t)]) * sc for t, sc in zip(terms, scale)]
            + [float(start[("mu_", "Intercept")]), float(start[("sigma_", "Intercept")])]
        )
    else:  # the mean and spread of the bounds' midpoints in log cost
        mid = np.where(np.isfinite(log_hi), np.where(np.isfinite(log_lo), (log_lo + log_hi) / 2, log_hi), log_lo)
        mid = mid[np.isfinite(mid)]
        centre = float(mid.mean()) if len(mid) else 0.0
        spread = float(mid.std()) if len(mid) > 1 and mid.std() > 0 else 1.0
        theta0 = np.concatenate([np.zeros(len(terms)), [centre, math.log(spread)]])

    def objective(theta):
        value, grad = _log_likelihood(theta, design, log_lo, log_hi, exact, w)
        return -value, -grad

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        result = optimize.minimize(objective, theta0, jac=True, method="BFGS", options={"gtol": GRADIENT_TOLERANCE})
        theta = result.x
        value, grad = _log_likelihood(theta, design, log_lo, log_hi, exact, w)
    if not (np.isfinite(theta).all() and np.isfinite(value)) or np.abs(grad).max() > 10 * GRADIENT_TOLERANCE:
        return None
    if math.exp(theta[-1]) < MIN_SIGMA:
        return None
    index = pd.MultiIndex.from_tuples(
        [("mu_", t) for t in terms] + [("mu_", "Intercept"), ("sigma_", "Intercept")], names=["param", "covariate"]
    )
    return pd.Series(np.concatenate([theta[: len(terms)] / scale, theta[len(terms) :]]), index=index)


def _units(rows: pd.DataFrame) -> tuple[str, list[list], np.ndarray]:
    """Bootstrap units within strata (models): pretraining seeds, or retrain seeds when every model has one
    network."""
    if rows.groupby("model")["pretrain_seed"].nunique().max() > 1:
        col = "pretrain_seed"
    else:
        col = "seed"
    keys = list(zip(rows["model"], rows[col]))
    strata = [sorted({k for k in keys if k[0] == m}) for m in sorted(rows["model"].unique())]
    return col, strata, np.array(keys, dtype=object)


def _weights(keys: np.ndarray, draw: dict) -> np.ndarray:
    return np.array([draw.get(tuple(k), 0) for k in keys], dtype=float)


def fit(cells: pd.DataFrame, max_resamples: int = MAX_FIT_RESAMPLES, workers: int = 1) -> pd.DataFrame:
    """The AFT fit's coefficients per (setting, threshold, term), on log cost; factor = exp(coef), the multiplicative
    effect on the cost (for log N and log D: cost grows as N^coef, D^coef). ``workers`` > 1: the bootstrap refits
    run in that many processes; the numbers are the same."""
    out = []
    with _pool(workers) as pool:
        for key, rows in _layer_cells(cells).groupby(survival.SETTING + ["threshold"], sort=True):
            out.extend(
                _coefficients(dict(zip(survival.SETTING + ["threshold"], key)), refits(rows, max_resamples, pool))
            )
    table = pd.DataFrame(out, columns=FIT_COLUMNS)
    for column in ("coef", "coef_lo", "coef_hi", "factor", "factor_lo", "factor_hi", "threshold"):
        table[column] = table[column].astype(float)
    table["determined"] = table["determined"].astype(bool)
    table["n_left_out"] = table["n_left_out"].fillna(0).astype(int)
    return table


def _pool(workers: int):
    return concurrent.futures.ProcessPoolExecutor(workers) if workers > 1 else contextlib.nullcontext()


@dataclasses.dataclass
class Refits:
    """The AFT fit of one group of single-layer cells (one setting and threshold) with its bootstrap refits on
    resampled pretrained networks: what ``fit`` reports as coefficients and ``out_of_sample`` uses to predict.

    A cell already within eps before any training cost nothing: a log-cost model cannot hold a cost of 0 (it would
    stand in as "below one example" and drive the coefficients to absurd sizes), and such a cell says nothing about
    healing. The fit is of the cost given damage beyond eps; the survival tables count them (n_at_zero)."""

    rows: pd.DataFrame  # the cells fitted (those at zero cost left out)
    x: pd.DataFrame  # their design
    unit: str
    terms: list[str]  # the terms fitted
    why: dict[str, tuple[str, str]]  # why a column of x is not fitted: (REASONS code, words)
    n_at_zero: int
    n_given: int
    point: pd.Series | None  # lifelines' params_, or None when not fitted (``note`` says why)
    note: str
    reason: str = ""  # REASONS code of ``note`` ("" when fitted)
    # Cells that left the fit because the term that identifies them is not determined (every one censored, or an
    # unmatched family): term -> (the value of that column of x the fit keeps, how many cells left).
    outside: dict[str, tuple[float, int]] = dataclasses.field(default_factory=dict)
    draws: list[pd.Series] = dataclasses.field(default_factory=list)
    probs: list[float] = dataclasses.field(default_factory=list)
    strata: list[list] = dataclasses.field(default_factory=list)
    interval_over: str = "none"
    n_failed: int = 0

    def log_median(self, params: pd.Series, cell: pd.Series) -> float:
        """log of the median cost of one cell (a row of survival.prepare) under ``params``: a log-normal AFT
        model's median is exp of its location."""
        x = _design(cell.to_frame().T)
        return float(params.loc[("mu_", "Intercept")]) + sum(
            float(params.loc[("mu_", t)]) * float(x[t].iloc[0]) for t in self.terms
        )

    def covers(self, cell: pd.Series) -> bool:
        """Whether the fit speaks for this cell: it is not of a kind whose cells left the fit (``outside``)."""
        x = _design(cell.to_frame().T)
        return all(
            term not in x or np.isclose(float(x[term].iloc[0]), value) for term, (value, _) in self.outside.items()
        )

    def predict(self, cell: pd.Series) -> tuple[float, float, float]:
        """The fit's median cost of one cell, in ``unit``, with its interval: the bootstrap's normal interval on the
        log scale (``_normal_interval``) over the refits."""
        centre = self.log_median(self.point, cell)
        lo, hi, _, _ = _normal_interval(centre, [self.log_median(d, cell) for d in self.draws], self.probs, self.strata)
        return math.exp(centre), math.exp(lo), math.exp(hi)


def _away(values: pd.Series, term: str) -> np.ndarray:
    """The cells that identify a term: for a first/last-layer indicator those it marks, else those away from the
    term's most common value (log E: the networks trained more than one epoch; a family: its own cells). When all
    of them are censored, the term's maximum-likelihood coefficient is unbounded."""
    v = values.to_numpy(float)
    if term in INDICATORS:
        return v == 1
    return ~np.isclose(v, values.mode().iloc[0])


def _label(term: str) -> str:
    return TERM_LABELS.get(term, term.replace("family", "family "))


def _unbounded(x: pd.DataFrame, upper: np.ndarray) -> list[str]:
    """The terms of ``x`` along which the likelihood never stops rising: the censored analogue of separation in
    logistic regression. A direction d of the coefficients (intercept included) that leaves every cell with a
    finite cost bound where it is (X_f d = 0) and lowers no censored cell's cost (X_c d >= 0) raises the censored
    cells' costs for free, so the maximum-likelihood coefficients run off along it and the optimiser stops
    anywhere. A term is unbounded when such a direction moves it: per term, a linear program (scipy's HiGHS) finds
    the largest |d_j| in that cone, normalised by sum(X_c d) <= 1 (the design has full rank, so the cone is
    bounded). This catches what a per-term check cannot: e.g. log E unbounded together with a family term, when
    every cell trained longer is censored but one family's, which its own term fits."""
    design = np.column_stack([np.ones(len(x)), x.to_numpy(float)])
    finite = np.isfinite(upper)
    fixed, censored = design[finite], design[~finite]
    if not len(censored) or not x.shape[1]:
        return []
    a_ub = np.vstack([-censored, censored.sum(axis=0, keepdims=True)])
    b_ub = np.append(np.zeros(len(censored)), 1.0)
    eq = {"A_eq": fixed, "b_eq": np.zeros(len(fixed))} if len(fixed) else {}
    out = []
    for j, term in enumerate(x.columns, start=1):
        for sign in (1.0, -1.0):
            objective = np.zeros(design.shape[1])
            objective[j] = -sign
            res = optimize.linprog(objective, A_ub=a_ub, b_ub=b_ub, bounds=(None, None), method="highs", **eq)
            if res.status == 3 or (res.status == 0 and -res.fun > UNBOUNDED_TOL * (1 + np.abs(design[:, j]).max())):
                out.append(term)
                break
    return out


def _unmatched_families(rows: pd.DataFrame, x: pd.DataFrame) -> dict[str, str]:
    """The family terms whose family shares no data regime (S, E) with any network of the reference family (the
    one without a term), each with why: such a term would compare the families only through the log S / log E
    trend extrapolated to that family's regime, not at the same training. Families are compared at the same S and
    E, as sizes are."""
    data_terms = [t for t in ("log_train_sequences", "log_epochs") if t in x.columns]
    family_terms = [t for t in x.columns if t.startswith("family[")]
    if not data_terms or not family_terms:
        return {}
    kind = rows["family_kind"].astype(str)
    regime = list(zip(rows["train_sequences"].astype(int), rows["epochs"].astype(int)))
    marked = x[family_terms].to_numpy(bool).any(axis=1)
    reference = {r for r, m in zip(regime, marked) if not m}
    why = {}
    for term in family_terms:
        own = sorted({r for r, m in zip(regime, x[term].to_numpy(bool)) if m})
        if not reference & set(own):
            ref_kind = kind[~marked].iloc[0] if (~marked).any() else "reference"
            why[term] = (
                "unmatched_family",
                f"not determined: no {term[7:-1]} network shares S × E with a {ref_kind} one (its "
                f"{', '.join(f'{s:,} × {e}' for s, e in own)}), so the term would be the log S / log E "
                f"trend extrapolated to its training, not a difference between families; its cells are "
                f"left out of this fit",
            )
    return why


def refits(rows: pd.DataFrame, max_resamples: int = MAX_FIT_RESAMPLES, pool=None) -> Refits:
    """The fit of ``rows`` (single-layer cells of one setting and threshold) and its refits on resampled networks
    (in ``pool``'s processes when given).

    A term whose identifying cells (``_away``) are all censored is not determined, and those cells leave the fit
    (``Refits.outside``): kept in without their term, their lower bounds would be absorbed by the other terms (every
    first-layer cell censored would lift the intercept and the size terms, and the other layers would seem to cost
    more than they do). The remaining terms are fitted on the cells that determine them, and the fit table says which
    cells were left out."""
    at_zero = rows["upper"].to_numpy(float) == 0
    rows = rows[~at_zero]
    unit = cost_unit(rows)
    x = _design(rows)
    outside: dict[str, tuple[float, int]] = {}

    def leave(term: str, mask: np.ndarray, keep_value: float) -> None:
        nonlocal rows, x
        outside[term] = (keep_value, int(mask.sum()))
        rows, x = rows[~mask], x[~mask]

    unmatched = _unmatched_families(rows, x)
    for term in unmatched:  # those families' cells leave the fit; their term stays in x (all zero) to say why
        leave(term, x[term].to_numpy(bool), 0.0)
    why: dict[str, tuple[str, str]] = dict(unmatched)
    censored = (rows["status"] != "recovered").to_numpy()
    while True:  # a term identified only by censored cells: its cells leave, and the rest is looked at again
        kept, found = identifiable(x.drop(columns=list(outside)))
        why.update({t: w for t, w in found.items() if t not in outside})
        if censored.all():  # all censored: the whole fit is not made (note)
            break
        dropped = [t for t in kept if censored[_away(x[t], t)].all()]
        if not dropped:
            break
        for term in dropped:
            mask = _away(x[term], term)
            keep_value = 0.0 if term in INDICATORS else float(x[term][~mask].iloc[0])
            why[term] = (
                "censored",
                f"not determined: every such cell is beyond the budget (only a lower bound on "
                f"its cost); its {int(mask.sum())} cells are left out of the fit",
            )
            leave(term, mask, keep_value)
            censored = censored[~mask]
    lower, upper = _bounds(rows, unit)
    unbounded = _unbounded(x[kept], upper) if len(rows) and not censored.all() else []
    for term in unbounded:
        kept.remove(term)
        others = [t for t in unbounded if t != term]
        why[term] = (
            "unbounded",
            "not determined: unbounded (the censored cells' costs rise for free along this term"
            + (f" together with {', '.join(_label(t) for t in others)}" if others else "")
            + ": every cell that would bound it is beyond the budget)",
        )
    n_parameters = len(kept) + 2  # the terms, the intercept and the scale
    n_points = x[kept].drop_duplicates().shape[0] if len(rows) else 0  # distinct settings the terms are fitted on
    reason, note = "", ""
    if not np.isfinite(upper).any():
        reason, note = "all_censored", "not fitted: every cell censored"
    elif len(at_zero) and at_zero.mean() > MAX_SHARE_AT_ZERO:
        reason = "mostly_free"
        note = (
            f"not determined: {int(at_zero.sum())} of {len(at_zero)} cells cost nothing at this ε "
            f"(more than {MAX_SHARE_AT_ZERO:.0%})"
        )
    elif len(rows) < MIN_CELLS_PER_PARAMETER * n_parameters:
        reason = "too_few_cells"
        note = (
            f"not determined: {len(rows)} cells for {n_parameters} parameters (fewer than "
            f"{MIN_CELLS_PER_PARAMETER} per parameter)"
        )
    elif kept and rows["model"].nunique() == 1 and n_points <= len(kept) + 1:
        reason = "saturated"
        note = (
            f"not determined: one model, whose {n_points} layer positions meet {len(kept) + 1} coefficients: the fit "
            "would only restate its per-layer costs"
        )
    point = _aft(x[kept], lower, upper) if not note else None
    if point is None and not note:
        reason, note = "not_converged", "not fitted: the model did not converge on this grid"
    result = Refits(rows, x, unit, kept, why, int(at_zero.sum()), len(at_zero), point, note, reason, outside)
    if point is not None:
        col, strata, keys = _units(rows)
        if sum(len(s) for s in strata) > len(strata):
            resamples = survival.cluster_resamples(strata, max_resamples)
            jobs = [(x[kept], lower, upper, _weights(keys, draw), point) for draw, _ in resamples]
            for coef, (_, prob) in zip(pool.map(_aft, *zip(*jobs)) if pool else [_aft(*j) for j in jobs], resamples):
                if coef is None:
                    result.n_failed += 1
                    continue
                result.draws.append(coef)
                result.probs.append(prob)
            result.strata, result.interval_over = strata, col if result.probs else "none"
    return result


def _coefficients(base: dict, r: Refits) -> list[dict]:
    """The fit table's rows of one group: a coefficient with its interval per fitted term, or why not."""
    at_zero = f"{r.n_at_zero} cell(s) within eps before any training left out (no cost to model)" if r.n_at_zero else ""

    def note(words: str) -> str:  # a row's note: its own words, then the cells at zero cost left out
        return "; ".join(filter(None, [words, at_zero]))

    base = {
        **base,
        "unit": r.unit,
        "n_cells": len(r.rows),
        "n_censored": int((r.rows["status"] != "recovered").sum()),
        "n_clusters": int(r.rows[survival.CLUSTER].drop_duplicates().shape[0]),
        "left_out": ",".join(r.outside),
        "n_left_out": sum(n for _, n in r.outside.values()),
    }
    out = []
    for term in r.x.columns:
        row = {
            **base,
            "term": term,
            "label": FIRST_VS_LAST
            if term == "first_layer" and not (r.rows["position"] == "middle").any()
            else _label(term),
            "n_resamples": len(r.probs),
            "n_failed": r.n_failed,
            "interval_over": r.interval_over,
        }
        if term not in r.terms or r.point is None:
            reason, words = r.why[term] if term not in r.terms else (r.reason, r.note)
            out.append({**row, "determined": False, "reason": reason, "note": note(words)})
            continue
        coef = float(r.point.loc[("mu_", term)])
        boot = [float(b.loc[("mu_", term)]) for b in r.draws]
        lo, hi, bias, spread = _normal_interval(coef, boot, r.probs, r.strata)
        if abs(bias) > UNSTABLE_BIAS * spread and abs(bias) > UNSTABLE_SHARE * abs(coef):
            # The refits on resampled networks centre far from the fit on all of them (a flat or multimodal
            # likelihood): neither the number nor an interval around it can be reported.
            out.append(
                {
                    **row,
                    "determined": False,
                    "reason": "unstable",
                    "note": note(
                        f"not determined: unstable (the fit on every network gives {coef:.3g}; its refits on resampled "
                        f"networks centre {bias:+.3g} away, more than {UNSTABLE_BIAS:g} standard errors and "
                        f"{UNSTABLE_SHARE:.0%} of the estimate)"
                    ),
                }
            )
            continue
        out.append(
            {
                **row,
                "determined": True,
                "reason": "",
                "note": note("" if r.probs else "no interval: one pretrained network and one seed per model"),
                "coef": coef,
                "coef_lo": lo,
                "coef_hi": hi,
                "factor": math.exp(coef),
                "factor_lo": math.exp(lo),
                "factor_hi": math.exp(hi),
            }
        )
    return out


def _normal_interval(
    coef: float, draws: list[float], probs: list[float], strata: list[list]
) -> tuple[float, float, float, float]:
    """(lo, hi, bias, standard error): the bootstrap's normal interval around the estimate, which contains it by
    construction, corrected for few clusters: resampling k clusters within a stratum underestimates the variance by
    (k - 1) / k, so the refits' (probability-weighted) standard deviation is scaled by sqrt(k / (k - 1)) (k: the
    mean number of clusters per stratum), and the quantile is Student's t with sum(k - 1) degrees of freedom.
    bias = the refits' mean - coef. With no refits: (coef, coef, 0, 0)."""
    if not probs:
        return coef, coef, 0.0, 0.0
    values, weights = np.asarray(draws, float), np.asarray(probs, float) / float(np.sum(probs))
    mean = float(np.sum(weights * values))
    sizes = [len(s) for s in strata if len(s) > 1]
    k = float(np.mean(sizes)) if sizes else 2.0
    dof = max(1, sum(n - 1 for n in sizes))
    spread = float(np.sqrt(np.sum(weights * (values - mean) ** 2))) * math.sqrt(k / (k - 1))
    q = float(stats.t.ppf(0.5 + survival.LEVEL / 2, dof))
    return coef - q * spread, coef + q * spread, mean - coef, spread


def _spearman(damage: np.ndarray, cost: np.ndarray, weights: np.ndarray | None = None) -> float:
    if weights is not None:
        damage, cost = np.repeat(damage, weights.astype(int)), np.repeat(cost, weights.astype(int))
    if len(damage) < 3 or np.ptp(damage) == 0 or len(np.unique(cost)) < 2:
        return math.nan
    return float(stats.spearmanr(stats.rankdata(damage), stats.rankdata(cost)).statistic)


def damage_cost(cells: pd.DataFrame, max_resamples: int = MAX_RANK_RESAMPLES) -> pd.DataFrame:
    """Spearman's rho between zero-step damage and cost across single-layer cells, per setting and threshold."""
    out = []
    layers = _layer_cells(cells)
    for (regime, policy, init, threshold), rows in layers.groupby(survival.SETTING + ["threshold"], sort=True):
        unit = cost_unit(rows)
        damage = rows["damage"].to_numpy(float)
        upper = _bounds(rows, unit)[1]
        cost = np.where(np.isfinite(upper), upper, np.inf)  # the crossing's evaluation; censored: above every one
        rho = _spearman(damage, cost)
        col, strata, keys = _units(rows)
        values, probs = [], []
        if not math.isnan(rho) and sum(len(s) for s in strata) > len(strata):
            for draw, prob in survival.cluster_resamples(strata, max_resamples):
                values.append(_spearman(damage, cost, _weights(keys, draw)))
                probs.append(prob)
        lo, hi = survival.weighted_interval(values, probs) if probs else (rho, rho)
        note = "" if not math.isnan(rho) else "undefined: fewer than 3 cells, or damage or cost does not vary"
        out.append(
            {
                "regime": regime,
                "policy": policy,
                "init": init,
                "threshold": threshold,
                "rho": rho,
                "rho_lo": lo,
                "rho_hi": hi,
                "n_cells": len(rows),
                "n_censored": int((rows["status"] != "recovered").sum()),
                "n_clusters": int(rows[survival.CLUSTER].drop_duplicates().shape[0]),
                "n_resamples": len(probs),
                "interval_over": col if probs else "none",
                "note": note,
            }
        )
    table = pd.DataFrame(out, columns=DAMAGE_COLUMNS)
    for column in ("rho", "rho_lo", "rho_hi", "threshold"):
        table[column] = table[column].astype(float)
    return table
