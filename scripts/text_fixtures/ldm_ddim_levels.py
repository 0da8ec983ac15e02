#!/usr/bin/env python3
"""The noise levels of CompVis's DDIMSampler (ldm/modules/diffusionmodules/util.py: make_beta_schedule
"linear", make_ddim_timesteps "uniform") in plain Python, for tests/plugins/sampler_plugins_test.cpp
(Samplers.LdmUniformDdimLevelsAreCompVisOwn). Usage: ldm_ddim_levels.py [STEPS] [T]"""
import math
import sys

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
T = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
lo, hi = 0.00085 ** 0.5, 0.012 ** 0.5  # txt2img-1p4B's (and SD's) linear_start, linear_end
betas = [(lo + (hi - lo) * i / (T - 1)) ** 2 for i in range(T)]
abar, p = [], 1.0
for b in betas:
    p *= 1 - b
    abar.append(p)
c = T // steps
timesteps = [t + 1 for t in range(0, T, c)]
sigma = lambda t: math.sqrt((1 - abar[t]) / abar[t])
levels = [sigma(t) for t in reversed(timesteps)] + [sigma(0)]
print(len(timesteps), "timesteps:", timesteps[:3], "...", timesteps[-1])
for i in (0, len(levels) // 2 - 1, len(levels) - 2, len(levels) - 1):
    print(f"sigma[{i}] = {levels[i]!r}")
