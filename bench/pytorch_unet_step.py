#!/usr/bin/python3
"""The PyTorch side of the engine benchmark: the same network and loss as bench/engine_bench.cpp
(DPDM's Fashion-MNIST UNet, privdiff's sdk/src/diffusion/unet.cpp written with torch.nn's own
layers), timed the same way: one warm-up step, then the median of REPEATS steps.

  nonprivate  zero_grad + forward + ordinary backward of the mean loss (what PyTorch users run)
  opacus      Opacus's standard DP step: GradSampleModule hooks, DPOptimizer.clip_and_accumulate (flat
              clipping at 1.0) into the clipped sum; no noise (the engine's DP step is timed the same way)
  opacus_ghost  Opacus's fast gradient clipping (GradSampleModuleFastGradientClipping, ghost norms where
              it has them): the two backward passes of DPTensorFastGradientClipping

Usage: bench/pytorch_unet_step.py MODE BATCH K [REPEATS] [THREADS] [cpu|cuda]  -> one JSON line, the
fields of engine_bench's (peak memory: resident on the CPU, the caching allocator's on a GPU), plus the
parameter shapes and the loss of the first step so that bench/side_by_side.sh can check the two
networks match. Runs on Debian's python3-torch (1.13) or the pinned PyTorch and Opacus of
bench/setup_reference_python.sh.
"""
import json
import math
import resource
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F


def groups_for(channels):
    return max(1, min(32, channels // 4))


class ResidualBlock(nn.Module):
    def __init__(self, cin, cout, emb_dim):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups_for(cin), cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.emb = nn.Linear(emb_dim, cout)
        self.norm2 = nn.GroupNorm(groups_for(cout), cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x, emb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.emb(F.silu(emb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return ((self.skip(x) if self.skip is not None else x) + h) / math.sqrt(2.0)


class AttentionBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.GroupNorm(groups_for(channels), channels)
        self.qkv = nn.Linear(channels, 3 * channels)
        self.proj = nn.Linear(channels, channels)

    def forward(self, x):
        n, c, h, w = x.shape
        tokens = self.norm(x).flatten(2).transpose(1, 2)
        q, k, v = self.qkv(tokens).chunk(3, -1)
        attention = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(c), -1)
        out = self.proj(attention @ v).transpose(1, 2).reshape(n, c, h, w)
        return (x + out) / math.sqrt(2.0)


class Unet(nn.Module):
    """privdiff's UnetConfig{} defaults: 28x28x1, 32 channels, x(1,2,2), 2 blocks, attention at 7."""

    def __init__(self, nf=32, mult=(1, 2, 2), blocks=2, attention=(7,), size=28, classes=10):
        super().__init__()
        emb = 4 * nf
        self.nf = nf
        self.sigma_mlp1 = nn.Linear(nf, emb)
        self.sigma_mlp2 = nn.Linear(emb, emb)
        self.class_embedding = nn.Embedding(classes + 1, emb)
        self.conv_in = nn.Conv2d(1, nf, 3, padding=1)
        self.down, self.up = nn.ModuleList(), nn.ModuleList()
        skips, ch, res = [nf], nf, size
        resolutions = []
        for level, m in enumerate(mult):
            resolutions.append(res)
            stage = nn.ModuleDict({"blocks": nn.ModuleList(), "attention": nn.ModuleList()})
            for _ in range(blocks):
                stage["blocks"].append(ResidualBlock(ch, nf * m, emb))
                ch = nf * m
                stage["attention"].append(AttentionBlock(ch) if res in attention else nn.Identity())
                skips.append(ch)
            if level + 1 < len(mult):
                stage["resample"] = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
                skips.append(ch)
                res = (res + 1) // 2
            self.down.append(stage)
        self.mid1 = ResidualBlock(ch, ch, emb)
        self.mid_attention = AttentionBlock(ch)
        self.mid2 = ResidualBlock(ch, ch, emb)
        for level in reversed(range(len(mult))):
            res = resolutions[level]
            stage = nn.ModuleDict({"blocks": nn.ModuleList(), "attention": nn.ModuleList()})
            for _ in range(blocks + 1):
                stage["blocks"].append(ResidualBlock(ch + skips.pop(), nf * mult[level], emb))
                ch = nf * mult[level]
                stage["attention"].append(AttentionBlock(ch) if res in attention else nn.Identity())
            if level > 0:
                stage["resample"] = nn.Conv2d(ch, ch, 3, padding=1)
            self.up.append(stage)
        self.norm_out = nn.GroupNorm(groups_for(ch), ch)
        self.conv_out = nn.Conv2d(ch, 1, 3, padding=1)

    def forward(self, x, c_noise, labels):
        half = self.nf // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=x.dtype, device=x.device) / half)
        args = c_noise[:, None] * freqs[None]
        emb = self.sigma_mlp2(F.silu(self.sigma_mlp1(torch.cat([args.sin(), args.cos()], 1))))
        emb = emb + self.class_embedding(labels)
        h = self.conv_in(x)
        skips = [h]
        for stage in self.down:
            for block, attention in zip(stage["blocks"], stage["attention"]):
                h = attention(block(h, emb))
                skips.append(h)
            if "resample" in stage:
                h = stage["resample"](h)
                skips.append(h)
        h = self.mid2(self.mid_attention(self.mid1(h, emb)), emb)
        for stage in self.up:
            for block, attention in zip(stage["blocks"], stage["attention"]):
                h = attention(block(torch.cat([h, skips.pop()], 1), emb))
            if "resample" in stage:
                target = skips[-1]
                h = stage["resample"](F.interpolate(h, size=target.shape[2:], mode="nearest"))
        return self.conv_out(F.silu(self.norm_out(h)))


def main():
    # Opacus's hooks fire on module outputs here by design (no input needs a gradient).
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    mode, batch, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    if len(sys.argv) > 5 and int(sys.argv[5]) > 0:
        torch.set_num_threads(int(sys.argv[5]))
    device = torch.device(sys.argv[6] if len(sys.argv) > 6 else "cpu")
    torch.manual_seed(0)
    model = Unet().to(device)
    images = (torch.rand(batch, 1, 28, 28) * 2 - 1).to(device)
    labels = torch.randint(0, 10, (batch,)).to(device)

    def rows(m, x0, y):  # the denoising loss of engine_bench: K noise draws per example
        x = x0.repeat_interleave(k, 0)
        y = y.repeat_interleave(k, 0)
        sigma = torch.exp(torch.randn(x.shape[0], device=x.device) * 1.2 - 1.2)
        noisy = x + sigma.view(-1, 1, 1, 1) * torch.randn_like(x)
        out = m(noisy / torch.sqrt(sigma ** 2 + 1.0 / 3).view(-1, 1, 1, 1), sigma.log() / 4, y)
        return (out - x).pow(2).flatten(1).mean(1).reshape(-1, k).mean(1)

    if mode == "nonprivate":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)

        def step():
            optimizer.zero_grad(set_to_none=True)
            rows(model, images, labels).mean().backward()
    elif mode == "opacus":
        # Opacus's standard mode: per-sample gradients by its hooks, then its optimizer's own
        # clip_and_accumulate (flat clipping at 1.0) into the clipped sum, noise left out as in the
        # engine's DP step (timed apart).
        from opacus import GradSampleModule  # pip: bench/setup_reference_python.sh
        from opacus.optimizers import DPOptimizer
        wrapped = GradSampleModule(model, loss_reduction="sum")
        optimizer = DPOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), noise_multiplier=0.0,
                                max_grad_norm=1.0, expected_batch_size=batch, loss_reduction="sum")

        def step():
            optimizer.zero_grad(set_to_none=True)
            rows(wrapped, images, labels).sum().backward()
            if k > 1:  # Opacus sees B*K rows: an example's gradient is the sum of its K rows'
                for p in model.parameters():
                    p.grad_sample = p.grad_sample.view(batch, k, *p.shape).sum(1)
            optimizer.clip_and_accumulate()
    elif mode == "opacus_ghost":
        # Opacus's fast gradient clipping with ghost norms (Linear, Embedding; its other layers
        # through per-sample gradients): two backward passes, as DPTensorFastGradientClipping does.
        if k > 1:  # ghost norms are per row; an example's K rows need the norm of their sum
            raise SystemExit("opacus_ghost: K > 1 is not supported (Opacus's ghost norms are per row)")
        from opacus.grad_sample import GradSampleModuleFastGradientClipping
        wrapped = GradSampleModuleFastGradientClipping(model, max_grad_norm=1.0, use_ghost_clipping=True,
                                                       loss_reduction="sum")

        def step():
            model.zero_grad(set_to_none=True)
            per_example = rows(wrapped, images, labels)
            per_example.sum().backward(retain_graph=True)
            model.zero_grad(set_to_none=True)
            coefficients = wrapped.get_clipping_coef()
            wrapped.disable_hooks()
            (coefficients.to(per_example.device) * per_example).sum().backward()
            wrapped.enable_hooks()
    else:
        raise SystemExit(f"unknown mode {mode}: nonprivate, opacus or opacus_ghost")
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()
    step()  # warm-up
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    median = sorted(times)[len(times) // 2]
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps({"mode": "pytorch_" + mode, "device": str(device), "batch": batch, "k": k,
                      "torch": torch.__version__,
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "shapes": sorted(list(p.shape) for p in model.parameters()),
                      "threads": torch.get_num_threads(), "seconds_per_step": round(median, 5),
                      "rows_per_second": round(batch * k / median),
                      "peak_rss_mib": round(peak)}))


if __name__ == "__main__":
    main()
