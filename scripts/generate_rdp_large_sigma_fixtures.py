#!/usr/bin/env python3
"""Writes tests/fixtures/accountants/rdp_large_sigma.csv: the RDP accountant's epsilon from sigma 0.3 to 1e6.

    python3 -m venv /tmp/refacct
    /tmp/refacct/bin/pip install dp-accounting==0.6.0 mpmath==1.4.1
    /tmp/refacct/bin/python scripts/generate_rdp_large_sigma_fixtures.py tests/fixtures/accountants

For each (q, steps, delta) of a few schedules and each noise multiplier sigma of a log grid from 0.3 to
1e6, one row with:

  dpa_epsilon_integer, dpa_order_integer  dp-accounting 0.6's RdpAccountant with the integer orders of
                              privdiff's default list (2, ..., 64, 80, ..., 1024): at integer orders its
                              RDP is the exact binomial sum, so privdiff must give the same epsilon;
  exact_epsilon_integer       the same epsilon from the exact binomial sums (mpmath, 60 digits): at
                              sigma >= ~1e5 with small q, A - 1 falls near 1e-16 and dp-accounting's
                              integer-order sum loses relative precision too (log A 9.955e-17 where the
                              exact value is 1.00000000005e-16 at q 0.001, sigma 1e5, order 2), so this
                              column decides where the two differ;
  dpa_epsilon_default, dpa_order_default  the same with privdiff's whole default list (fractional orders
                              1.1, 1.2, ... included): dp-accounting's fractional-order series adds
                              |C(alpha, i)| and, at large sigma, loses all relative precision (at
                              sigma 8000 it gives RDP 3.4e-5 at order 1.1 where the exact value is
                              8.6e-11), so privdiff (exact there) may only be lower, never higher;
  exact_rdp_1_1               the exact RDP of the whole schedule at order 1.1 (steps x the RDP of one
                              step), by mpmath quadrature of A - 1 = E[(1 + u)^a - 1 - a u] with
                              u = q (exp((2z - 1) / (2 sigma^2)) - 1), z ~ N(0, sigma^2) (60 digits);
  kl_bound                    1 when delta^2 + expm1(-exact_rdp_1_1) >= 0: then the KL bound
                              (Bretagnolle-Huber: total variation <= sqrt(1 - exp(-KL)), KL <= RDP at
                              any order > 1) gives (0, delta)-DP exactly, and epsilon 0 is the right
                              answer (dp-accounting applies the same branch, with its own RDP values).

Only the libraries' outputs are used; no code of theirs is copied into privdiff. Runs in about a minute.
"""
import csv
import importlib.metadata as metadata
import os
import sys

import mpmath as mp
import dp_accounting as dpa
from dp_accounting.rdp import rdp_privacy_accountant as rdp_acc

mp.mp.dps = 60

DEFAULT_ORDERS = [1 + x / 10 for x in range(1, 100)] + list(range(11, 65)) + [80, 96, 128, 160, 192, 256, 384, 512, 768, 1024]
INTEGER_ORDERS = [int(a) for a in DEFAULT_ORDERS if float(a).is_integer()]
SIGMAS = [0.3, 0.5, 1, 2, 5, 10, 30, 100, 300, 1000, 3000, 5000, 8000, 1e4, 3e4, 1e5, 3e5, 1e6]
SCHEDULES = [(0.01, 100, 1e-5), (0.2, 100, 1e-5), (1e-3, 10000, 1e-6)]


def exact_rdp_one_step(q, sigma, alpha):
    q, s, a = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)

    def integrand(z):
        u = q * mp.expm1((2 * z - 1) / (2 * s * s))
        return mp.npdf(z, 0, s) * ((1 + u) ** a - 1 - a * u)

    points = [-40 * s, -10 * s, -3 * s, 0, mp.mpf("0.5"), a, 3 * s + a, 10 * s + a, 40 * s + a]
    return mp.log1p(mp.quad(integrand, sorted(set(points)), maxdegree=10)) / (a - 1)


def exact_epsilon_integer(q, sigma, steps, delta):
    """The improved conversion (Balle et al. 2020) at the integer orders, from the exact binomial sum of
    A - 1 (every term positive: no cancellation, whatever q and sigma), with the KL branch."""
    q, s, delta = mp.mpf(q), mp.mpf(sigma), mp.mpf(delta)
    best = mp.inf
    for alpha in INTEGER_ORDERS:
        a_minus_1 = mp.fsum(mp.binomial(alpha, i) * q**i * (1 - q) ** (alpha - i) * mp.expm1((i * i - i) / (2 * s * s))
                            for i in range(2, alpha + 1))
        r = steps * mp.log1p(a_minus_1) / (alpha - 1)
        if delta**2 + mp.expm1(-r) >= 0:
            return mp.mpf(0)
        best = min(best, r + mp.log1p(-mp.mpf(1) / alpha) - (mp.log(delta) + mp.log(alpha)) / (alpha - 1))
    return max(best, mp.mpf(0))


def dpa_epsilon(q, sigma, steps, delta, orders):
    accountant = rdp_acc.RdpAccountant(orders)
    accountant.compose(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps))
    eps, order = accountant.get_epsilon_and_optimal_order(delta)
    return float(eps), float(order)


def main(out_dir):
    path = os.path.join(out_dir, "rdp_large_sigma.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["q", "steps", "delta", "sigma", "dpa_epsilon_integer", "dpa_order_integer",
                    "dpa_epsilon_default", "dpa_order_default", "exact_epsilon_integer", "exact_rdp_1_1", "kl_bound"])
        f.write("# generated by scripts/generate_rdp_large_sigma_fixtures.py with dp-accounting==%s mpmath==%s\n"
                % (metadata.version("dp-accounting"), metadata.version("mpmath")))
        for q, steps, delta in SCHEDULES:
            for sigma in SIGMAS:
                e_int, o_int = dpa_epsilon(q, sigma, steps, delta, INTEGER_ORDERS)
                e_def, o_def = dpa_epsilon(q, sigma, steps, delta, DEFAULT_ORDERS)
                r = steps * exact_rdp_one_step(q, sigma, 1.1)
                kl = 1 if mp.mpf(delta) ** 2 + mp.expm1(-r) >= 0 else 0
                exact = exact_epsilon_integer(q, sigma, steps, delta)
                w.writerow([repr(q), steps, repr(delta), repr(float(sigma)), repr(e_int), repr(o_int), repr(e_def),
                            repr(o_def), mp.nstr(exact, 25), mp.nstr(r, 25), kl])
    print("wrote", path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/accountants")
