#!/usr/bin/env python3
"""Generates the high-precision reference values privdiff's private-selection accounting (privdiff
sweep) is tested against, computed with mpmath at 60 digits from the definitions, independently of
privdiff's code:
  * the truncated negative binomial D_{eta,gamma} of Papernot & Steinke (ICLR 2022, Definition 1):
    its probabilities (the product formula, or the logarithmic one at eta = 0) and E[K], the latter
    also summed from the probabilities;
  * the candidate: T steps of the Poisson-subsampled Gaussian, its RDP at integer orders by the exact
    binomial expansion of A_alpha;
  * the selection's RDP (Theorem 2: truncated negative binomial; Theorem 6: Poisson, with the
    candidate's delta at eps_hat = log1p(1/(lambda - 1)) from its RDP curve; a fixed K composes) and
    its epsilon at delta by the improved conversion (Canonne, Kamath & Steinke 2020), minimised over
    the orders (and order pairs) given.

Usage (Debian: apt-get install python3-mpmath):
    python3 scripts/generate_selection_fixtures.py tests/fixtures/accountants
Writes selection_count.csv and selection.csv.
"""
import csv
import os
import sys

import mpmath as mp

mp.mp.dps = 60

ORDERS = list(range(2, 65))
COUNTS = [("truncated_negative_binomial", 1, "0.25"), ("truncated_negative_binomial", 0, "0.1"),
          ("truncated_negative_binomial", "0.5", "0.2"), ("truncated_negative_binomial", "-0.5", "0.3")]
CANDIDATES = [("0.01", "1.1", 1000), ("0.05", "2.0", 400), ("1", "20", 1)]  # q, sigma, steps
SELECTIONS = [("truncated_negative_binomial", 1, "0.25"), ("truncated_negative_binomial", 0, "0.1"),
              ("truncated_negative_binomial", "0.5", "0.125"), ("poisson", "4", None), ("fixed", 4, None)]
DELTA = mp.mpf("1e-5")


def tnb_probability(eta, gamma, k):
    eta, gamma = mp.mpf(eta), mp.mpf(gamma)
    if eta == 0:
        return (1 - gamma) ** k / (k * mp.log(1 / gamma))
    product = mp.mpf(1)
    for l in range(k):
        product *= (l + eta) / (l + 1)
    return (1 - gamma) ** k / (gamma ** (-eta) - 1) * product


def tnb_mean(eta, gamma):
    eta, gamma = mp.mpf(eta), mp.mpf(gamma)
    if eta == 0:
        return (1 / gamma - 1) / mp.log(1 / gamma)
    return eta * (1 - gamma) / (gamma * (1 - gamma**eta))


def candidate_rdp(q, sigma, steps, alpha):
    q, s = mp.mpf(q), mp.mpf(sigma)
    total = mp.mpf(0)
    for i in range(alpha + 1):
        total += mp.binomial(alpha, i) * q**i * (1 - q) ** (alpha - i) * mp.exp((i * i - i) / (2 * s * s))
    return steps * mp.log(total) / (alpha - 1)


def to_epsilon(rdp, alpha, delta):  # Canonne, Kamath & Steinke 2020 (privdiff's "improved")
    if delta * delta + mp.expm1(-rdp) >= 0:
        return mp.mpf(0)
    return max(mp.mpf(0), rdp + mp.log1p(-mp.mpf(1) / alpha) - (mp.log(delta) + mp.log(alpha)) / (alpha - 1))


def to_delta(curve, eps):
    best = mp.mpf(0)
    for alpha, rdp in curve.items():
        log_d = min(mp.log1p(-mp.exp(-rdp)) / 2, (alpha - 1) * (rdp - eps + mp.log1p(-mp.mpf(1) / alpha)) - mp.log(alpha))
        best = min(best, log_d)
    return mp.exp(best)


def selection(kind, a, b, curve):
    """The smallest epsilon over the orders (pairs), with the order(s) that give it."""
    best = (mp.inf, None, None)
    for lam in ORDERS:
        if kind == "truncated_negative_binomial":
            eta, gamma = mp.mpf(a), mp.mpf(b)
            for hat in ORDERS:
                rdp = (curve[lam] + (1 + eta) * (1 - mp.mpf(1) / hat) * curve[hat] + (1 + eta) * mp.log(1 / gamma) / hat
                       + mp.log(tnb_mean(a, b)) / (lam - 1))
                eps = to_epsilon(rdp, lam, DELTA)
                if eps < best[0]:
                    best = (eps, lam, hat)
        else:
            if kind == "poisson":
                mu = mp.mpf(a)
                rdp = curve[lam] + mu * to_delta(curve, mp.log1p(mp.mpf(1) / (lam - 1))) + mp.log(mu) / (lam - 1)
            else:
                rdp = int(a) * curve[lam]
            eps = to_epsilon(rdp, lam, DELTA)
            if eps < best[0]:
                best = (eps, lam, lam)
    return best


def main(out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "selection_count.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["eta", "gamma", "k", "probability", "mean", "mean_by_sum"])
        for _, eta, gamma in COUNTS:
            by_sum = mp.nsum(lambda k: k * tnb_probability(eta, gamma, int(k)), [1, mp.inf])
            for k in range(1, 6):
                w.writerow([eta, gamma, k, mp.nstr(tnb_probability(eta, gamma, k), 20), mp.nstr(tnb_mean(eta, gamma), 20),
                            mp.nstr(by_sum, 20)])
    with open(os.path.join(out, "selection.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["q", "sigma", "steps", "distribution", "a", "b", "delta", "epsilon", "order", "order_hat"])
        for q, sigma, steps in CANDIDATES:
            curve = {alpha: candidate_rdp(q, sigma, steps, alpha) for alpha in ORDERS}
            for kind, a, b in SELECTIONS:
                eps, lam, hat = selection(kind, a, b, curve)
                w.writerow([q, sigma, steps, kind, a, b if b is not None else "", mp.nstr(DELTA, 5), mp.nstr(eps, 20), lam, hat])
                print(q, sigma, steps, kind, a, b, mp.nstr(eps, 12), lam, hat, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
