#!/usr/bin/python3
"""The PyTorch side of the engine benchmark: the same network and loss as bench/engine_bench.cpp
(DPDM's Fashion-MNIST UNet, privdiff's sdk/src/diffusion/unet.cpp written with torch.nn's own
layers), timed the same way: one warm-up step, then the median of REPEATS steps.

  nonprivate  zero_grad + forward + ordinary backward of the mean loss (what PyTorch users run)
  opacus      Opacus's DP step (GradSampleModule hooks, flat clipping at 1.0), when opacus imports

Usage: bench/pytorch_unet_step.py MODE BATCH K [REPEATS] [THREADS] [cpu|cuda]  -> one JSON line, the
fields of engine_bench's (peak memory: resident on the CPU, the caching allocator's on a GPU). Needs python3-torch (Debian); the parameter count is printed so the two networks
can be checked to be the same size.
"""
import json
import math
import resource
import sys
import time

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
        from opacus import GradSampleModule  # not in Debian: pip install opacus
        wrapped = GradSampleModule(model)

        def step():
            wrapped.zero_grad(set_to_none=True)
            rows(wrapped, images, labels).sum().backward()
            norms = torch.stack([p.grad_sample.flatten(1).norm(dim=1) for p in model.parameters()], 1).norm(dim=1)
            factors = (1.0 / (norms + 1e-6)).clamp(max=1.0)
            for p in model.parameters():
                p.grad = torch.einsum("i,i...->...", factors, p.grad_sample)
    else:
        raise SystemExit(f"unknown mode {mode}: nonprivate or opacus")
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
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "threads": torch.get_num_threads(), "seconds_per_step": round(median, 5),
                      "rows_per_second": round(batch * k / median),
                      "peak_rss_mib": round(peak)}))


if __name__ == "__main__":
    main()
