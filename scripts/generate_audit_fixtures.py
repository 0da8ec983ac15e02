#!/usr/bin/env python3
"""Reference numbers for the one-run audit bound (Steinke, Nasr, Jagielski 2023, App. D) in
50-digit arithmetic with mpmath, independent of the C++ (which works in doubles and log space).

    /usr/bin/python3 scripts/generate_audit_fixtures.py tests/fixtures/audit

Writes one_run.csv: m, r, v, eps, delta, beta, p_value (at eps), epsilon_lower (at beta).
Needs Debian's python3-mpmath (development time only).
"""
import csv
import os
import sys

import mpmath as mp

mp.mp.dps = 50


def p_value(m, r, v, eps, delta):
    q = 1 / (1 + mp.e ** (-mp.mpf(eps)))
    pmf = [mp.binomial(r, k) * q**k * (1 - q) ** (r - k) for k in range(r + 1)]
    beta = mp.fsum(pmf[v:])
    if delta == 0:
        return min(beta, mp.mpf(1))
    alpha, below = mp.mpf(0), mp.mpf(0)
    for i in range(1, v + 1):
        below += pmf[v - i]
        alpha = max(alpha, below / i)
    return min(beta + alpha * mp.mpf(delta) * 2 * m, mp.mpf(1))


def epsilon_lower(m, r, v, delta, beta):
    if p_value(m, r, v, 0, delta) >= beta:
        return mp.mpf(0)
    lo, hi = mp.mpf(0), mp.mpf(1)
    while p_value(m, r, v, hi, delta) < beta:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if p_value(m, r, v, mid, delta) < beta:
            lo = mid
        else:
            hi = mid
    return lo


CASES = [  # m, r, v, eps, delta, beta
    (100, 20, 15, 1.0, 0.0, 0.05),
    (100, 20, 20, 2.0, 1e-5, 0.05),
    (1000, 100, 80, 0.5, 1e-5, 0.05),
    (1000, 200, 150, 1.5, 1e-5, 0.05),
    (1000, 1000, 600, 0.3, 1e-6, 0.01),
    (5000, 500, 450, 2.0, 1e-5, 0.05 / 6),
    (5000, 5000, 5000, 8.0, 1e-5, 0.05),
    (10000, 2000, 1200, 0.4, 1e-5, 0.05),
    (10000, 10000, 9000, 3.0, 1e-5, 0.05 / 6),
    (50, 10, 3, 0.0, 1e-3, 0.05),
]


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/audit"
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "one_run.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["m", "r", "v", "eps", "delta", "beta", "p_value", "epsilon_lower"])
        for m, r, v, eps, delta, beta in CASES:
            w.writerow([m, r, v, eps, delta, repr(beta), mp.nstr(p_value(m, r, v, eps, delta), 20),
                        mp.nstr(epsilon_lower(m, r, v, delta, mp.mpf(beta)), 20)])


if __name__ == "__main__":
    main()
