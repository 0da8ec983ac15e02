#!/usr/bin/env python3
"""Reference structure of DPImageBench's downstream classifiers, for the C++ in
sdk/src/evaluation/benchmark_classifiers.cpp. Regenerate with

    /usr/bin/python3 tests/sdk/evaluation/benchmark_classifiers_make_reference.py

(torch 1.13 at development time only). Writes tests/fixtures/benchmark_classifiers/parameter_counts.json:
per network and input, the number of parameters, the parameter tensors' shapes in registration order,
the BatchNorm running-statistics size, the output shape and the logits of two fixed images through the
net in eval mode with fixed weights (set_pattern_weights: a forward-pass check, layer wiring included,
where the counts only check sizes); plus torch's own StepLR learning rates for DPImageBench's two
schedules (the C++ step rule is checked against them).

The models below are a second-language statement of DPImageBench's evaluation/classifier/{resnet,wrn,
resnext}.py (github.com/2019ChenGong/DPImageBench, commit 565f8d7), written from reading that code:
same layers, same order, same widths, same forward pass; no weight initialisation (the pattern
replaces it).
The architectures' hyper-parameters are those evaluation/evaluator.py (cal_acc) passes:
  CIFAR-10/100 ('cifar' in the dataset's name): ResNet depth 164 (BasicBlock), WRN-28-10, ResNeXt
  depth 28 (8 groups, widen 10); every other dataset: the constructors' defaults, ResNet-110
  (BasicBlock), WRN-40-4, ResNeXt-29 (8 groups, widen 4).
While writing this, every entry was also computed once with DPImageBench's own classes (imported from
a checkout): the same counts and shapes, and the same pattern logits (to float rounding).
"""
import json
import os

import torch
from torch import nn

# ---- ResNet (evaluation/classifier/resnet.py, BasicBlock only: DPImageBench never asks for Bottleneck)


class ResNetBasicBlock(nn.Module):
    def __init__(self, inputs, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inputs != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inputs, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, depth, channels, image_size, classes):
        super().__init__()
        assert (depth - 2) % 6 == 0
        blocks = (depth - 2) // 6
        self.conv1 = nn.Conv2d(channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        stages, inputs = [], 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            stage = [ResNetBasicBlock(inputs, planes, stride)]
            stage += [ResNetBasicBlock(planes, planes, 1) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*stage))
            inputs = planes
        self.layer1, self.layer2, self.layer3 = stages
        self.pool = nn.AvgPool2d(image_size // 4)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.pool(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(x.view(x.size(0), -1))


# ---- Wide ResNet (evaluation/classifier/wrn.py): pre-activation blocks, dropout between the two convs


class WideBlock(nn.Module):
    def __init__(self, inputs, outputs, stride, dropout):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(inputs)
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.same_width = inputs == outputs
        self.shortcut = None if self.same_width else nn.Conv2d(inputs, outputs, 1, stride, 0, bias=False)
        self.dropout = dropout

    def forward(self, x):
        activated = torch.relu(self.bn1(x))
        out = torch.relu(self.bn2(self.conv1(activated)))
        out = nn.functional.dropout(out, self.dropout, self.training)
        out = self.conv2(out)
        # A widening block's shortcut sees the activated input; an identity shortcut the raw one.
        return (x if self.same_width else self.shortcut(activated)) + out


class WideResNet(nn.Module):
    def __init__(self, depth, widen, dropout, channels, image_size, classes):
        super().__init__()
        assert (depth - 4) % 6 == 0
        blocks = (depth - 4) // 6
        widths = [16, 16 * widen, 32 * widen, 64 * widen]
        self.conv1 = nn.Conv2d(channels, 16, 3, 1, 1, bias=False)
        groups = []
        for g, stride in enumerate((1, 2, 2)):
            group = [WideBlock(widths[g], widths[g + 1], stride, dropout)]
            group += [WideBlock(widths[g + 1], widths[g + 1], 1, dropout) for _ in range(blocks - 1)]
            groups.append(nn.Sequential(*group))
        self.block1, self.block2, self.block3 = groups
        self.bn1 = nn.BatchNorm2d(widths[3])
        self.fc = nn.Linear(widths[3], classes)
        self.image_size = image_size

    def forward(self, x):
        x = self.block3(self.block2(self.block1(self.conv1(x))))
        x = nn.functional.avg_pool2d(torch.relu(self.bn1(x)), self.image_size // 4)
        return self.fc(x.view(-1, self.fc.in_features))


# ---- ResNeXt (evaluation/classifier/resnext.py): bottlenecks of width D = groups * out / widen


class ResNeXtBottleneck(nn.Module):
    def __init__(self, inputs, outputs, stride, cardinality, widen):
        super().__init__()
        inner = cardinality * outputs // widen
        self.conv_reduce = nn.Conv2d(inputs, inner, 1, 1, 0, bias=False)
        self.bn_reduce = nn.BatchNorm2d(inner)
        self.conv_conv = nn.Conv2d(inner, inner, 3, stride, 1, groups=cardinality, bias=False)
        self.bn = nn.BatchNorm2d(inner)
        self.conv_expand = nn.Conv2d(inner, outputs, 1, 1, 0, bias=False)
        self.bn_expand = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Sequential()
        if inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, 0, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x):
        out = torch.relu(self.bn_reduce(self.conv_reduce(x)))
        out = torch.relu(self.bn(self.conv_conv(out)))
        out = self.bn_expand(self.conv_expand(out))
        return torch.relu(self.shortcut(x) + out)


class ResNeXt(nn.Module):
    def __init__(self, depth, cardinality, widen, channels, image_size, classes):
        super().__init__()
        blocks = (depth - 2) // 9  # floor: depth 28 gives 2 bottlenecks per stage, like depth 20
        widths = [64, 64 * widen, 128 * widen, 256 * widen]
        self.conv_1_3x3 = nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
        self.bn_1 = nn.BatchNorm2d(64)
        stages = []
        for s, stride in enumerate((1, 2, 2)):
            stage = [ResNeXtBottleneck(widths[s], widths[s + 1], stride, cardinality, widen)]
            stage += [ResNeXtBottleneck(widths[s + 1], widths[s + 1], 1, cardinality, widen) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*stage))
        self.stage_1, self.stage_2, self.stage_3 = stages
        self.classifier = nn.Linear(widths[3], classes)
        self.image_size = image_size

    def forward(self, x):
        x = torch.relu(self.bn_1(self.conv_1_3x3(x)))
        x = self.stage_3(self.stage_2(self.stage_1(x)))
        x = nn.functional.avg_pool2d(x, self.image_size // 4, 1)
        return self.classifier(x.view(x.size(0), -1))


# (network, depth, widen, cardinality, dropout)
DPIMAGEBENCH = {
    "non_cifar": [("resnet", 110, 1, 1, 0.0), ("wrn", 40, 4, 1, 0.3), ("resnext", 29, 4, 8, 0.0)],
    "cifar": [("resnet", 164, 1, 1, 0.0), ("wrn", 28, 10, 1, 0.3), ("resnext", 28, 10, 8, 0.0)],
}
# The small variants the C++ learning tests train (same code path, fewer/narrower blocks).
SMALL = [("resnet", 8, 1, 1, 0.0), ("wrn", 10, 1, 1, 0.3), ("resnext", 11, 1, 2, 0.0)]
# (architectures, channels, image size, classes): MNIST/FashionMNIST, EuroSAT, CIFAR-10, CIFAR-100,
# CelebA 64 (DPImageBench trains no ResNeXt above 32 x 32), and the tests' inputs.
CASES = [
    ("non_cifar", DPIMAGEBENCH["non_cifar"], 1, 28, 10),
    ("non_cifar", DPIMAGEBENCH["non_cifar"], 3, 32, 10),
    ("cifar", DPIMAGEBENCH["cifar"], 3, 32, 10),
    ("cifar", DPIMAGEBENCH["cifar"], 3, 32, 100),
    ("non_cifar", DPIMAGEBENCH["non_cifar"][:2], 3, 64, 2),
    ("small", SMALL, 1, 28, 10),
    ("small", SMALL, 3, 32, 10),
]


def build(network, depth, widen, cardinality, dropout, channels, image_size, classes):
    if network == "resnet":
        return ResNet(depth, channels, image_size, classes)
    if network == "wrn":
        return WideResNet(depth, widen, dropout, channels, image_size, classes)
    return ResNeXt(depth, cardinality, widen, channels, image_size, classes)


def pattern(tensor_index, shape):
    """sin(0.37 j + 1.3 i) over the flat index j: the same numbers in C++, no RNG to agree on."""
    count = 1
    for size in shape:
        count *= size
    j = torch.arange(count, dtype=torch.float64)
    return torch.sin(0.37 * j + 1.3 * tensor_index).reshape(shape)


def set_pattern_weights(net):
    """Weights and BatchNorm statistics from `pattern`, in registration order (the C++ test does the same):
    conv/linear weights 0.5 p / sqrt(fan-in) (tame through 164 layers), norm scales 1 + 0.1 p,
    biases 0.1 p, running means 0.1 p, running variances 1 + 0.25 (1 + p)."""
    with torch.no_grad():
        for i, (name, p) in enumerate(net.named_parameters()):
            values = pattern(i, p.shape)
            if p.dim() >= 2:
                values = 0.5 * values / (p[0].numel() ** 0.5)
            elif name.endswith("weight"):
                values = 1 + 0.1 * values
            else:
                values = 0.1 * values
            p.copy_(values)
        statistics = [(n, b) for n, b in net.named_buffers() if n.endswith(("running_mean", "running_var"))]
        for k, (name, b) in enumerate(statistics):
            values = pattern(k, b.shape)
            b.copy_(0.1 * values if name.endswith("running_mean") else 1 + 0.25 * (1 + values))


def pattern_images(channels, image_size):
    j = torch.arange(2 * channels * image_size * image_size, dtype=torch.float64)
    return torch.sin(0.05 * j + 0.5).reshape(2, channels, image_size, image_size).float()


def describe(label, architecture, channels, image_size, classes):
    network, depth, widen, cardinality, dropout = architecture
    net = build(network, depth, widen, cardinality, dropout, channels, image_size, classes).eval()
    set_pattern_weights(net)
    with torch.no_grad():
        out = net(pattern_images(channels, image_size))
    stats = [b for name, b in net.named_buffers() if name.endswith(("running_mean", "running_var"))]
    return {
        "label": label, "network": network, "depth": depth, "widen_factor": widen, "cardinality": cardinality,
        "channels": channels, "image_size": image_size, "classes": classes,
        "parameters": sum(p.numel() for p in net.parameters()),
        "parameter_tensors": len(list(net.parameters())),
        "running_statistics": sum(b.numel() for b in stats),
        "output_shape": list(out.shape),
        "pattern_logits": [float("%.8g" % v) for v in out.flatten()],  # eval mode, pattern weights and images
        "parameter_shapes": [list(p.shape) for p in net.parameters()],
    }


def step_lr_rates(lr, step, gamma, epochs, make_optimizer):
    """The learning rate of each epoch under torch's StepLR stepped once per epoch (cal_acc's usage)."""
    parameter = nn.Parameter(torch.zeros(1))
    optimizer = make_optimizer([parameter], lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=step, gamma=gamma)
    rates = []
    for _ in range(epochs):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = os.path.join(here, "..", "..", "fixtures", "benchmark_classifiers")
    os.makedirs(out_dir, exist_ok=True)
    networks = [describe(label, a, c, s, k) for label, architectures, c, s, k in CASES for a in architectures]
    schedules = {
        "non_cifar": step_lr_rates(0.01, 20, 0.2, 50, lambda p, lr: torch.optim.Adam(p, lr=lr)),
        "cifar": step_lr_rates(0.1, 60, 0.2, 200,
                               lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.9, weight_decay=5e-4)),
    }
    path = os.path.join(out_dir, "parameter_counts.json")
    with open(path, "w") as f:
        # One network per line: the shape lists are long but the diffs stay readable.
        f.write('{\n  "step_lr": ' + json.dumps(schedules) + ',\n  "networks": [\n')
        f.write(",\n".join("    " + json.dumps(n, separators=(",", ":")) for n in networks))
        f.write("\n  ]\n}\n")
    for n in networks:
        print(f'{n["label"]:9} {n["network"]:7} depth {n["depth"]:3} widen {n["widen_factor"]:2} groups '
              f'{n["cardinality"]} in {n["channels"]}x{n["image_size"]} classes {n["classes"]:3}: '
              f'{n["parameters"]:>10,}')
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
