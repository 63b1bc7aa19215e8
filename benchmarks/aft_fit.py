"""The scaling fit's log-normal AFT (``selfheal.analysis.scaling._aft``, written here) against lifelines'
LogNormalAFTFitter, which it replaced: the same cells (the shipped fully trained run's single-layer cells at every
ε, the full fit and its cluster-bootstrap refits, as the fit table makes them), timed side by side in one run, one thread, with the
largest difference in the maximised log-likelihood.

    .venv/bin/python benchmarks/aft_fit.py            # writes block `aft-fit` of docs/performance.md

The fit table makes one fit and up to ``scaling.MAX_FIT_RESAMPLES`` refits per setting and ε, so the per-fit time
sets the answer rule's time and most of the statistics tests'.
"""

from __future__ import annotations

import argparse
import time
import warnings

from common import ROOT, add_write_flag, machine, publish

from selfheal import results
from selfheal.analysis import scaling, survival

REFERENCE = ROOT / "reference" / "fully_trained"
REFITS = 8  # cluster-bootstrap refits per threshold (at most), each from the full fit


def _problems():
    tables = results.load(REFERENCE)
    cells = survival.prepare(tables["summary"], tables["networks"])
    for eps, x, lower, upper, strata, keys in scaling.plain_problems(cells):
        weights = [scaling._weights(keys, draw) for draw, _ in survival.cluster_resamples(strata, REFITS)]
        yield eps, x, lower, upper, weights


def _lifelines(x, lower, upper, weights=None):
    from lifelines import LogNormalAFTFitter

    data = x.assign(_lo=lower, _hi=upper)
    if weights is not None:
        data = data.assign(_w=weights)[weights > 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitter = LogNormalAFTFitter().fit_interval_censoring(
            data, "_lo", "_hi", weights_col="_w" if weights is not None else None
        )
    return fitter.params_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_write_flag(parser)
    a = parser.parse_args()
    timings = {"selfheal": 0.0, "lifelines": 0.0}
    fits, worst = 0, 0.0
    for eps, x, lower, upper, weights in _problems():
        for name, fit in (("selfheal", scaling._aft), ("lifelines", _lifelines)):
            t0 = time.perf_counter()
            point = fit(x, lower, upper)
            for w in weights:
                fit(x, lower, upper, w, point) if name == "selfheal" else fit(x, lower, upper, w)
            timings[name] += time.perf_counter() - t0
            if name == "selfheal":
                ours = point
        theirs = _lifelines(x, lower, upper)
        worst = max(
            worst, abs(scaling.log_likelihood(ours, x, lower, upper) - scaling.log_likelihood(theirs, x, lower, upper))
        )
        fits += 1 + len(weights)
    ratio = timings["lifelines"] / timings["selfheal"]
    text = (
        f"On {machine()} (`.venv/bin/python benchmarks/aft_fit.py`): {fits} log-normal AFT fits of "
        f"reference/fully_trained's single-layer cells (per ε the full fit and up to {REFITS} cluster-bootstrap "
        "refits): "
        f"selfheal's `scaling._aft` {1000 * timings['selfheal'] / fits:.0f} ms per fit, lifelines' "
        f"LogNormalAFTFitter {1000 * timings['lifelines'] / fits:.0f} ms: **{ratio:.0f}×**; the maximised "
        f"log-likelihoods differ by at most {worst:.1e}."
    )
    publish("aft-fit", text, not a.no_write)


if __name__ == "__main__":
    main()
