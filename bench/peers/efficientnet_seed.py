#!/usr/bin/env python3
"""Seed 002's EfficientNet (B0..B7) in PyTorch, layer for layer, for the side-by-side benchmarks.

This is NOT torchvision's efficientnet_b0: it is the network the seed builds from scratch in Keras
(and that src/applications/efficientnet.cpp builds in mixprec):

  stem:   Conv2D(32, 3, stride 2, same) -> BatchNormalization -> relu6
  blocks: InvertResidualBlock(out, kernel, stride, expansion), each
            expand     Conv2D(in * expansion, 1) -> BN -> relu6   (kept even at expansion 1)
            depthwise  DepthwiseConv2D(kernel, stride, same) -> BN -> relu6
            SE         GlobalAveragePooling2D -> (E, 1, 1) -> Conv2D(E / r, 1) -> relu6
                       -> Conv2D(E, 1) -> sigmoid -> multiply into the features,
                       r = 24 when it divides E, else 4
            project    Conv2D(out, 1) -> BN (linear)
            + the block input when stride == 1 and in == out
          first InvertResidualBlock(16, 3, 1, expansion 1), then the stages
          (filters, kernel, repeats, stride) = (24, 3, 2, 2), (40, 5, 2, 2), (80, 3, 3, 2),
          (112, 5, 3, 1), (192, 5, 4, 2), (320, 3, 1, 1), expansion 6
  top:    Conv2D(1280, 1) -> BN -> relu6 -> GlobalAveragePooling2D -> Dense(classes)
  output: Softmax in float32 (here: forward() returns the logits; the caller applies the float32
          (log-)softmax, as the benchmark's loss does, or calls probabilities()).

Every convolution has a bias (Keras' default use_bias=True, which the seed keeps), BatchNormalization
uses Keras' defaults (momentum 0.99 -> PyTorch momentum 0.01, epsilon 1e-3), and `same` padding is
TensorFlow's: out = ceil(in / stride), the odd padding row/column after the input (bottom/right).
PyTorch's symmetric padding puts the windows of a stride-2 convolution one pixel off, so those
convolutions pad explicitly (F.pad) and convolve with `valid`; the stride-1 ones pad symmetrically
inside the convolution (no extra pass).

Compound scaling, `scaling="seed"` (default): exactly the seed's code. Its coefficient table
{phi: (1.0, 1.0, 224), (1.0, 1.1, 240), ...} is passed positionally as (depth, width, resolution),
round_filters/round_repeats scale the six stages of the `args` table only; the stem (32), the first
block (16, one repeat) and the top (1280) are fixed.
`scaling="paper"`: what mixprec's applications::efficientnet() does (the EfficientNet paper and
keras.applications): the table read as (width, depth), and the stem, the first block and the top
scaled as well. For B0 (width = depth = 1) the two are the same network.

  from efficientnet_seed import efficientnet
  model = efficientnet(0, classes=100)          # the seed's B0 for CIFAR-100 (embedding_dims = 100)
  python3 bench/peers/efficientnet_seed.py --variant 0 --classes 1000 --input-size 224
"""
import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

# The seed's table, in the seed's order: phi -> (first, second, resolution). The seed passes it to
# EfficientNet_Baseline(depth_coefficient, width_coefficient, image_size).
COEFFICIENTS = {
    0: (1.0, 1.0, 224),
    1: (1.0, 1.1, 240),
    2: (1.1, 1.2, 260),
    3: (1.2, 1.4, 300),
    4: (1.4, 1.8, 380),
    5: (1.6, 2.2, 456),
    6: (1.8, 2.6, 528),
    7: (2.0, 3.1, 600),
}

# The seed's `args` (filters, kernel size, repeats, stride) of the middle flow; expansion 6.
STAGES = [(24, 3, 2, 2), (40, 5, 2, 2), (80, 3, 3, 2), (112, 5, 3, 1), (192, 5, 4, 2), (320, 3, 1, 1)]
STEM_FILTERS = 32
FIRST_BLOCK_FILTERS = 16
TOP_FILTERS = 1280
EXPANSION = 6
# Keras BatchNormalization defaults: moving = 0.99 * moving + 0.01 * batch, epsilon 1e-3.
BN_MOMENTUM = 0.01
BN_EPSILON = 1e-3


def round_filters(filters, width_coefficient, depth_divisor=8):
    """The seed's round_filters: nearest multiple of 8 (>= 8), bumped when it lost over 10%."""
    filters *= width_coefficient
    new_filters = int(filters + depth_divisor / 2) // depth_divisor * depth_divisor
    new_filters = max(depth_divisor, new_filters)
    if new_filters < 0.9 * filters:
        new_filters += depth_divisor
    return int(new_filters)


def round_repeats(repeats, depth_coefficient):
    """The seed's round_repeats: ceil(depth * repeats)."""
    return int(math.ceil(depth_coefficient * repeats))


def coefficients(variant, scaling="seed"):
    """(width, depth, resolution) of EfficientNet-B<variant> under the given scaling."""
    if variant not in COEFFICIENTS:
        raise ValueError("variant must be 0..7 (B0..B7), got %r" % (variant,))
    first, second, resolution = COEFFICIENTS[variant]
    if scaling == "seed":
        return second, first, resolution  # the seed: (depth, width) = (first, second)
    if scaling == "paper":
        return first, second, resolution  # the paper / mixprec: (width, depth) = (first, second)
    raise ValueError("scaling must be 'seed' or 'paper', got %r" % (scaling,))


def same_padding(size, kernel, stride):
    """TensorFlow `same`: (before, after) so that out = ceil(size / stride); after >= before."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class SameConv2d(nn.Conv2d):
    """nn.Conv2d with TensorFlow's `same` padding (asymmetric when the total padding is odd)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, groups=1, bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=0,
                         groups=groups, bias=bias)

    def forward(self, x):
        (kh, kw), (sh, sw) = self.kernel_size, self.stride
        top, bottom = same_padding(x.shape[-2], kh, sh)
        left, right = same_padding(x.shape[-1], kw, sw)
        if top == bottom and left == right:
            # Symmetric: let the convolution pad (no extra pass over x).
            return F.conv2d(x, self.weight, self.bias, self.stride, (top, left), 1, self.groups)
        x = F.pad(x, (left, right, top, bottom))
        return F.conv2d(x, self.weight, self.bias, self.stride, 0, 1, self.groups)


class ReLU6(nn.Module):
    """min(max(x, 0), 6), in place (as nn.ReLU6(inplace=True): one tensor fewer kept).
    torch 1.13's CPU has no bfloat16 hardtanh backward: there it is an out-of-place clamp."""

    def forward(self, x):
        if x.dtype == torch.bfloat16 and not x.is_cuda:
            return x.clamp(0.0, 6.0)
        return F.hardtanh(x, 0.0, 6.0, inplace=True)


def batch_norm(channels):
    return nn.BatchNorm2d(channels, eps=BN_EPSILON, momentum=BN_MOMENTUM)


class ConvBNAct(nn.Sequential):
    """The seed's ConvBNReLU "naive"/"expansion"/"pointwise": conv -> BN [-> relu6]."""

    def __init__(self, in_channels, out_channels, kernel_size=1, stride=1, activation=True):
        layers = [SameConv2d(in_channels, out_channels, kernel_size, stride), batch_norm(out_channels)]
        if activation:
            layers.append(ReLU6())
        super().__init__(*layers)


class SqueezeExcite(nn.Module):
    """The seed's SE_Block ("transformed": 1x1 convolutions with biases), relu6 then sigmoid."""

    def __init__(self, channels):
        super().__init__()
        # The seed's ConvBNReLU("depthwise"): 4 if C % 24 else 24; SE_Block asserts it divides C.
        rate = 4 if channels % 24 else 24
        if channels % rate:
            raise ValueError("SE: %d channels are not divisible by the reduction rate %d" % (channels, rate))
        self.reduce = nn.Conv2d(channels, channels // rate, 1)
        self.expand = nn.Conv2d(channels // rate, channels, 1)
        self.relu6 = ReLU6()

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)  # (B, E, H, W) -> (B, E, 1, 1)
        s = torch.sigmoid(self.expand(self.relu6(self.reduce(s))))
        return x * s


class InvertedResidual(nn.Module):
    """The seed's InvertResidualBlock: (B, in, H, W) -> (B, out, H / stride, W / stride)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, expansion):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError("stride must be 1 or 2, got %r" % (stride,))
        expanded = in_channels * expansion
        self.expand = ConvBNAct(in_channels, expanded, 1)
        self.depthwise = nn.Sequential(
            SameConv2d(expanded, expanded, kernel_size, stride, groups=expanded), batch_norm(expanded),
            ReLU6())
        self.se = SqueezeExcite(expanded)
        self.project = ConvBNAct(expanded, out_channels, 1, activation=False)
        self.residual = stride == 1 and in_channels == out_channels

    def forward(self, x):
        y = self.project(self.se(self.depthwise(self.expand(x))))
        return y + x if self.residual else y


class EfficientNetSeed(nn.Module):
    """Seed 002's EfficientNet-B<variant>; forward() returns float logits (B, classes)."""

    def __init__(self, variant=0, classes=100, channels=3, scaling="seed"):
        super().__init__()
        width, depth, self.resolution = coefficients(variant, scaling)
        scale_all = scaling == "paper"
        stem = round_filters(STEM_FILTERS, width) if scale_all else STEM_FILTERS
        top = round_filters(TOP_FILTERS, width) if scale_all else TOP_FILTERS
        first = round_filters(FIRST_BLOCK_FILTERS, width) if scale_all else FIRST_BLOCK_FILTERS
        first_repeats = round_repeats(1, depth) if scale_all else 1

        self.stem = ConvBNAct(channels, stem, 3, 2)  # (B, C, S, S) -> (B, 32, S/2, S/2)
        blocks = []
        in_channels = stem
        for r in range(first_repeats):
            blocks.append(InvertedResidual(in_channels, first, 3, 1, 1))
            in_channels = first
        for filters, kernel, repeats, stride in STAGES:
            out = round_filters(filters, width)
            for r in range(round_repeats(repeats, depth)):
                blocks.append(InvertedResidual(in_channels, out, kernel, stride if r == 0 else 1, EXPANSION))
                in_channels = out
        self.blocks = nn.Sequential(*blocks)
        self.top = ConvBNAct(in_channels, top, 1)  # (B, 320 w, S/32, S/32) -> (B, 1280, ...)
        self.classifier = nn.Linear(top, classes)

    def forward(self, x):
        x = self.top(self.blocks(self.stem(x)))
        return self.classifier(x.mean((2, 3)))  # GlobalAveragePooling2D -> Dense

    def probabilities(self, x):
        """The seed's output: Softmax(dtype=float32) of the logits."""
        return torch.softmax(self.forward(x).float(), dim=-1)


def efficientnet(variant=0, classes=100, channels=3, scaling="seed"):
    return EfficientNetSeed(variant, classes, channels, scaling)


def parameter_counts(model):
    """(trainable parameters, + BatchNorm moving mean/variance): the second is what Keras'
    count_params() and mixprec's Model::count_params() report."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    moving = sum(m.running_mean.numel() + m.running_var.numel()
                 for m in model.modules() if isinstance(m, nn.BatchNorm2d))
    return trainable, trainable + moving


def main():
    p = argparse.ArgumentParser(description="print the structure summary of seed 002's EfficientNet")
    p.add_argument("--variant", type=int, default=0)
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--input-size", type=int, default=None, help="default: the variant's resolution")
    p.add_argument("--scaling", choices=["seed", "paper"], default="seed")
    args = p.parse_args()
    model = efficientnet(args.variant, args.classes, scaling=args.scaling)
    size = args.input_size or model.resolution
    trainable, with_moving = parameter_counts(model)
    blocks = len(model.blocks)
    with torch.no_grad():
        model.eval()
        features = model.top(model.blocks(model.stem(torch.zeros(1, 3, size, size))))
    print("efficientnet-b%d (%s scaling): %d blocks, stem %d, top %d, features %s at %dx%d" % (
        args.variant, args.scaling, blocks, model.stem[0].out_channels, model.top[0].out_channels,
        tuple(features.shape[1:]), size, size))
    print("parameters: %d trainable, %d with BatchNorm moving statistics (Keras count_params)" % (
        trainable, with_moving))


if __name__ == "__main__":
    main()
