#!/usr/bin/env python3
"""Generates the high-precision reference values the accountant tests compare against.

Independent of privdiff's code: everything here is computed with mpmath at 60-100 significant
digits, by definitions rather than by the algorithms privdiff uses:
  * RDP of the Poisson-subsampled Gaussian: integer orders by the exact binomial expansion of
    A_alpha; fractional orders by adaptive quadrature of the defining integral
    A_alpha = E_{z~N(0,s^2)}[((1-q) + q exp((2z-1)/(2 s^2)))^alpha]  (cross-checked against the
    binomial sum on integer orders);
  * the analytic Gaussian mechanism (Balle & Wang 2018): sigma solving delta(sigma, eps) = delta by
    bisection on the exact formula;
  * composed Gaussian mechanisms (q = 1): n steps of noise multiplier s are one Gaussian of
    s / sqrt(n), so the exact epsilon at delta is known in closed form (the PRV reference).

Usage (Debian: apt-get install python3-mpmath):
    python3 scripts/generate_accountant_fixtures.py tests/fixtures/accountants
Writes rdp.csv, analytic_gaussian.csv and gaussian_composition.csv. Takes a few minutes.
"""
import csv
import os
import sys

import mpmath as mp

mp.mp.dps = 60


def log_a_integer(q, s, alpha):
    q, s = mp.mpf(q), mp.mpf(s)
    total = mp.mpf(0)
    for i in range(alpha + 1):
        total += mp.binomial(alpha, i) * q**i * (1 - q) ** (alpha - i) * mp.exp((i * i - i) / (2 * s * s))
    return mp.log(total)


def log_a_quadrature(q, s, alpha):
    q, s, alpha = mp.mpf(q), mp.mpf(s), mp.mpf(alpha)

    def integrand(z):
        base = (1 - q) + q * mp.exp((2 * z - 1) / (2 * s * s))
        return mp.npdf(z, 0, s) * base**alpha

    # Modes near z = 0 (the 1-q part) and z = alpha (the q part); split around both so the
    # quadrature resolves every peak, each of width ~ s.
    points = sorted(set([mp.mpf(0), alpha, mp.mpf("0.5")] + [c + k * s for c in (0, alpha) for k in (-40, -10, -3, 3, 10, 40)]))
    return mp.log(mp.quad(integrand, [-mp.inf] + points + [mp.inf], maxdegree=10))


def rdp(q, s, alpha):
    if q == 1:
        return mp.mpf(alpha) / (2 * mp.mpf(s) ** 2)
    if float(alpha).is_integer():
        log_a = log_a_integer(q, s, int(alpha))
    else:
        log_a = log_a_quadrature(q, s, alpha)
    return log_a / (mp.mpf(alpha) - 1)


def gaussian_delta(sigma, eps):
    sigma, eps = mp.mpf(sigma), mp.mpf(eps)
    return mp.ncdf(1 / (2 * sigma) - eps * sigma) - mp.exp(eps) * mp.ncdf(-1 / (2 * sigma) - eps * sigma)


def bisect(f, lo, hi, decreasing, iterations=400):
    """Root of f on [lo, hi] by bisection in log space (f changes sign once)."""
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    for _ in range(iterations):
        mid = mp.sqrt(lo * hi) if lo > 0 else (lo + hi) / 2
        if (f(mid) > 0) == decreasing:
            lo = mid
        else:
            hi = mid
        if hi - lo < mp.mpf(10) ** (-45) * hi:
            break
    return (lo + hi) / 2


def analytic_sigma(eps, delta):
    target = mp.log(mp.mpf(delta))
    return bisect(lambda s: mp.log(gaussian_delta(s, eps)) - target, mp.mpf(10) ** -6, mp.mpf(10) ** 6, decreasing=True)


def gaussian_epsilon(sigma, delta):
    """Smallest eps with delta(sigma, eps) <= delta, for one Gaussian of noise multiplier sigma."""
    if gaussian_delta(sigma, 0) <= delta:
        return mp.mpf(0)
    target = mp.log(mp.mpf(delta))
    return bisect(lambda e: mp.log(gaussian_delta(sigma, e)) - target, mp.mpf(10) ** -12, mp.mpf(10) ** 5, decreasing=True)


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)

    # Cross-check the quadrature against the exact sum before trusting it on fractional orders.
    for q, s, a in [(0.01, 1.0, 8), (0.5, 0.5, 3), (1e-5, 20.0, 32), (0.2, 2.0, 16)]:
        exact, quad = log_a_integer(q, s, a), log_a_quadrature(q, s, a)
        assert abs(exact - quad) <= mp.mpf(10) ** -25 * abs(exact) + mp.mpf(10) ** -30, (q, s, a, exact, quad)

    with open(os.path.join(out_dir, "rdp.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["q", "sigma", "order", "rdp"])
        for q in ["1e-7", "1e-5", "1e-3", "0.01", "0.05", "0.2", "0.5", "0.9", "1"]:
            for s in ["0.1", "0.5", "1", "2", "5", "20", "100"]:
                for a in ["1.1", "1.5", "2", "2.5", "3.7", "8", "16.5", "32", "64", "128", "1024"]:
                    if s == "0.1" and float(a) > 64 and q not in ("1", "1e-7"):
                        continue  # A_alpha ~ exp(alpha^2/(2 s^2)) ~ e^50000000: beyond any use
                    value = rdp(mp.mpf(q), mp.mpf(s), mp.mpf(a))
                    w.writerow([q, s, a, mp.nstr(value, 20)])
                    f.flush()

    mp.mp.dps = 120
    with open(os.path.join(out_dir, "analytic_gaussian.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["epsilon", "delta", "sigma"])
        for eps in ["0.01", "0.1", "1", "5", "10", "50", "100", "1000"]:
            for delta in ["1e-3", "1e-5", "1e-10", "1e-12", "1e-20", "1e-50", "1e-100", "1e-300"]:
                w.writerow([eps, delta, mp.nstr(analytic_sigma(mp.mpf(eps), mp.mpf(delta)), 20)])

    with open(os.path.join(out_dir, "gaussian_composition.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["sigma", "steps", "delta", "epsilon"])
        for s, n in [("0.8", 10), ("1", 1), ("2", 100), ("5", 1000), ("10", 20000), ("1.5", 50000)]:
            for delta in ["1e-5", "1e-8", "1e-12"]:
                eff = mp.mpf(s) / mp.sqrt(n)
                w.writerow([s, n, delta, mp.nstr(gaussian_epsilon(eff, mp.mpf(delta)), 20)])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/accountants")
