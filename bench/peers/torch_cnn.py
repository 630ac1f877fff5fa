#!/usr/bin/env python3
"""PyTorch peer of `mixprec bench --model efficientnet-b0..b7|resnet50|cnn`: the same networks
(seed 002's EfficientNet from efficientnet_seed.py, ResNet-50 v1.5 built here layer for layer as
torchvision's, the Fashion-MNIST CNN of src/applications/cnn.cpp), trained on one synthetic batch
(uniform [0, 1) images, uniform labels) with Adam (Keras defaults: lr 1e-3, betas 0.9/0.999,
epsilon 1e-7), a float32 softmax cross-entropy on integer labels, BatchNorm in training mode, timed
per step. Writes rows in the DESIGN §5 schema so they can sit next to mixprec's.

  python3 bench/peers/torch_cnn.py --model cnn --device cpu --batch-size 256 --json out.json
  python3 bench/peers/torch_cnn.py --model efficientnet-b0 --device cuda --batch-size 256 \
      --policies mixed_float16,mixed_bfloat16 --compile --json out.json
  python3 bench/peers/torch_cnn.py --model resnet50 --device cuda --policies mixed_float16 \
      --find-max-batch --json max.json

Policies map to PyTorch as (bench/peers/README.md):
  float32        no autocast; TF32 off (true FP32) unless --tf32 on|both (rows say "tf32")
  mixed_float16  torch.autocast(float16) + GradScaler(init_scale 32768, growth_interval 2000, as
                 Keras' LossScaleOptimizer); CUDA only (torch 1.13's CPU autocast has no float16:
                 an "unsupported" row)
  mixed_bfloat16 torch.autocast(bfloat16), no scaler (as Keras)
Parameters and optimizer state stay float32 under every policy (autocast casts per op), as
mixprec's float32 master variables. channels_last (NHWC, mixprec's layout) is on by default.
"""
import argparse
import gc
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_blas  # noqa: E402  (which BLAS and CPU the peer runs with)
import efficientnet_seed  # noqa: E402  (the seed's EfficientNet, next to this file)

RESNET50_PARAMETERS = 25557032  # torchvision.models.resnet50(): sum(p.numel()), 1000 classes


# ---- ResNet-50 v1.5 (torchvision's layout; no torchvision import needed) ----

class Bottleneck(nn.Module):
    """1x1 -> 3x3 (stride: v1.5) -> 1x1 (4 x width), BN after each, identity or projection
    shortcut. (B, in, H, W) -> (B, 4 width, H / stride, W / stride)."""

    def __init__(self, in_channels, width, stride):
        super().__init__()
        out = 4 * width
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.downsample = None
        if stride != 1 or in_channels != out:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)
        y = F.relu(self.bn2(self.conv2(y)), inplace=True)
        y = self.bn3(self.conv3(y))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(y + shortcut, inplace=True)


class ResNet50(nn.Module):
    """torchvision's resnet50() (BatchNorm eps 1e-5, momentum 0.1): forward() returns logits."""

    def __init__(self, classes=1000, channels=3):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages, in_channels = [], 64
        for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            layer = []
            for b in range(blocks):
                layer.append(Bottleneck(in_channels, width, stride if b == 0 else 1))
                in_channels = 4 * width
            stages.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(2048, classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x)), inplace=True))  # (B, 64, S/4, S/4)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))        # (B, 2048, S/32, S/32)
        return self.fc(x.mean((2, 3)))


# ---- the Fashion-MNIST CNN of src/applications/cnn.cpp ----

class SmallCnn(nn.Module):
    """[Conv(32, 3, same, no bias) -> BN -> relu] x 2 -> MaxPool(2) -> the same with 64 ->
    Flatten (NHWC order, as Keras) -> Dense(128, relu) -> Dropout(0.3) -> Dense(classes).
    BatchNorm with Keras' defaults (momentum 0.99, epsilon 1e-3)."""

    def __init__(self, classes=10, channels=1, input_size=28):
        super().__init__()
        layers, in_channels = [], channels
        for filters in (32, 64):
            for _ in range(2):
                layers += [nn.Conv2d(in_channels, filters, 3, padding=1, bias=False),
                           nn.BatchNorm2d(filters, eps=1e-3, momentum=0.01), nn.ReLU(inplace=True)]
                in_channels = filters
            layers.append(nn.MaxPool2d(2))  # Keras MaxPooling2D(2): floor(side / 2)
        self.features = nn.Sequential(*layers)
        side = input_size // 2 // 2
        self.dense = nn.Linear(side * side * 64, 128)
        self.dropout = nn.Dropout(0.3)
        self.logits = nn.Linear(128, classes)

    def forward(self, x):
        x = self.features(x)                   # (B, 64, S/4, S/4)
        x = x.permute(0, 2, 3, 1).flatten(1)   # Keras' NHWC flatten order (a view under channels_last)
        return self.logits(self.dropout(F.relu(self.dense(x))))


# ---- models, FLOPs ----

def model_spec(name):
    """(kind, variant) for --model; ValueError listing the valid names otherwise."""
    if name in ("resnet50", "cnn"):
        return name, None
    if name.startswith("efficientnet-b") and name[-1:].isdigit() and len(name) == 15 and int(name[-1]) <= 7:
        return "efficientnet", int(name[-1])
    raise ValueError("unknown model %r; valid: cnn, efficientnet-b0 .. efficientnet-b7, resnet50" % name)


def defaults(name):
    """(input size, channels, classes) when not given: mixprec's defaults for the same model
    (224 for the ImageNet networks on a GPU, 28x28x1 with 10 classes for the cnn)."""
    kind, variant = model_spec(name)
    if kind == "cnn":
        return 28, 1, 10
    return 224, 3, 1000


def build_model(args):
    kind, variant = model_spec(args.model)
    torch.manual_seed(0)
    if kind == "efficientnet":
        return efficientnet_seed.efficientnet(variant, args.classes, args.channels, scaling=args.scaling)
    if kind == "resnet50":
        model = ResNet50(args.classes, args.channels)
        if args.classes == 1000 and args.channels == 3:
            n = sum(p.numel() for p in model.parameters())
            assert n == RESNET50_PARAMETERS, "ResNet-50 has %d parameters, torchvision's has %d" % (
                n, RESNET50_PARAMETERS)
        return model
    return SmallCnn(args.classes, args.channels, args.input_size)


def forward_flops(model, args):
    """Multiply-add FLOPs (2 per MAC) of the convolutions and dense layers of one sample's
    forward pass, from forward hooks (any torch version): conv 2 * out elements * in/groups * kh *
    kw, dense 2 * in * out. Elementwise work (BN, activations, SE gating) is not counted. On torch
    >= 2.1 the count is cross-checked with torch.utils.flop_counter.FlopCounterMode."""
    total = [0]

    def conv_hook(m, inputs, out):
        kh, kw = m.kernel_size
        total[0] += 2 * out.numel() * (m.in_channels // m.groups) * kh * kw

    def linear_hook(m, inputs, out):
        total[0] += 2 * out.numel() * m.in_features

    hooks = [m.register_forward_hook(conv_hook if isinstance(m, nn.Conv2d) else linear_hook)
             for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    x = torch.rand(1, args.channels, args.input_size, args.input_size)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(x)
        counted = None
        try:
            from torch.utils.flop_counter import FlopCounterMode
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                model(x)
            counted = counter.get_total_flops()
        except ImportError:
            pass
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    if counted is not None and abs(counted - total[0]) > 0.01 * total[0]:
        print("warning: FlopCounterMode counts %d forward FLOPs, the hooks %d" % (counted, total[0]),
              file=sys.stderr)
    return total[0], counted is not None


# ---- one timed configuration ----

def autocast_dtype(policy):
    return {"float32": None, "mixed_float16": torch.float16, "mixed_bfloat16": torch.bfloat16}[policy]


def make_scaler():
    # Keras LossScaleOptimizer: initial scale 2^15, doubled after 2000 finite steps, halved on Inf/NaN.
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", init_scale=32768.0, growth_interval=2000)
    return torch.cuda.amp.GradScaler(init_scale=32768.0, growth_interval=2000)


def make_optimizer(model, device):
    # Keras Adam defaults. fused=True (one multi-tensor kernel, unscale + Inf check folded in under
    # the GradScaler) is PyTorch's fastest Adam on CUDA; mixprec's update is one fused pass too.
    kwargs = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    if device.type == "cuda" and int(torch.__version__.split(".")[0]) >= 2:
        kwargs["fused"] = True
    return torch.optim.Adam(model.parameters(), **kwargs)


def set_tf32(enabled):
    """TF32 for float32 matmuls and convolutions on or off. torch >= 2.9 has the fp32_precision
    settings (the allow_tf32 flags are deprecated there, and mixing the two APIs is refused);
    older versions only the flags."""
    matmul = torch.backends.cuda.matmul
    try:  # torch 1.13's matmul backend raises AssertionError (not AttributeError) for unknown names
        new_api = isinstance(matmul.fp32_precision, str) and hasattr(torch.backends.cudnn, "conv")
    except (AttributeError, AssertionError):
        new_api = False
    if new_api:
        mode = "tf32" if enabled else "ieee"
        matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode
    else:
        matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


class Trainer:
    """Model, optimizer, scaler and the step function of one (system, policy)."""

    def __init__(self, args, policy, system):
        self.device = torch.device(args.device)
        self.model = build_model(args).to(self.device)
        if args.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.model.train()  # BatchNorm uses batch statistics and updates its moving ones
        self.opt = make_optimizer(self.model, self.device)
        self.dtype = autocast_dtype(policy)
        self.scaler = make_scaler() if policy == "mixed_float16" else None
        device_type = self.device.type

        def forward_loss(x, y):
            if self.dtype is None:
                logits = self.model(x)
            else:
                with torch.autocast(device_type=device_type, dtype=self.dtype):
                    logits = self.model(x)
            # The seed's Softmax(dtype=float32) + sparse categorical cross-entropy, in float32.
            return F.nll_loss(F.log_softmax(logits.float(), dim=-1), y)

        self.forward_loss = torch.compile(forward_loss, dynamic=False) if system == "torch-compile" else forward_loss

    def step(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        loss = self.forward_loss(x, y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)  # skipped when a gradient is Inf/NaN
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        return loss


def make_batch(args, batch):
    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.rand(batch, args.channels, args.input_size, args.input_size, generator=gen)
    y = torch.randint(0, args.classes, (batch,), generator=gen)
    x, y = x.to(args.device), y.to(args.device)
    if args.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    return x, y


def base_row(args, system, policy, tf32):
    row = {"system": system, "model": args.model, "policy": policy, "batch_size": args.batch_size,
           "input_size": args.input_size, "channels_last": args.channels_last}
    if policy == "float32" and args.device == "cuda":
        row["tf32"] = tf32
    return row


def unsupported(args, system, policy):
    if policy == "mixed_float16" and args.device == "cpu":
        return "torch %s has no float16 autocast on the CPU" % torch.__version__
    if system == "torch-compile" and not hasattr(torch, "compile"):
        return "torch %s has no torch.compile (added in 2.0)" % torch.__version__
    return None


def run(args, system, policy, tf32, flops_per_sample):
    row = base_row(args, system, policy, tf32)
    why = unsupported(args, system, policy)
    if why:
        row["unsupported"] = why
        return row
    cuda = args.device == "cuda"
    if cuda:
        set_tf32(tf32)
        gc.collect()
        torch.cuda.empty_cache()
    trainer = Trainer(args, policy, system)
    x, y = make_batch(args, args.batch_size)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        sync()
        torch.cuda.reset_peak_memory_stats()
    # The first step compiles under torch.compile (forward and backward graphs): timed on its own
    # and reported as compile_s, never mixed into the step times.
    start = time.perf_counter()
    trainer.step(x, y)
    sync()
    first_s = time.perf_counter() - start
    for _ in range(max(args.warmup - 1, 0)):
        trainer.step(x, y)
    sync()
    times, skipped = [], 0
    for _ in range(args.steps):
        scale = trainer.scaler.get_scale() if trainer.scaler is not None else None
        start = time.perf_counter()
        loss = trainer.step(x, y)
        sync()
        times.append((time.perf_counter() - start) * 1e3)
        if scale is not None and trainer.scaler.get_scale() < scale:
            skipped += 1  # the scaler halved its scale: this step's update was skipped
    median = statistics.median(times)
    if cuda:
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # process peak RSS
    row.update({"step_ms": {"min": min(times), "median": median, "max": max(times)},
                "samples_per_s": args.batch_size / (median / 1e3)})
    if flops_per_sample:
        row["tflops"] = 3.0 * flops_per_sample * args.batch_size / (median / 1e3) / 1e12
    row["peak_memory_bytes"] = peak
    if cuda:
        row["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    if system == "torch-compile":
        row["compile_s"] = first_s  # the first step: compilation of forward + backward included
    row["first_step_s"] = first_s
    row["final_loss"] = float(loss)
    if trainer.scaler is not None:
        row["final_loss_scale"] = trainer.scaler.get_scale()
        row["skipped_steps"] = skipped
    del trainer, x, y, loss
    return row


# ---- the largest batch that fits (GPU) ----

def fits(args, policy, tf32, batch):
    """Two eager training steps at `batch`; False on CUDA out-of-memory."""
    set_tf32(tf32)
    ok = True
    try:
        trainer = Trainer(args, policy, "torch-eager")
        x, y = make_batch(args, batch)
        for _ in range(2):
            trainer.step(x, y)
        torch.cuda.synchronize()
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError, or cuDNN/cuBLAS failing to allocate
        text = str(e)
        if not (isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in text
                or "ALLOC_FAILED" in text):
            raise
        ok = False
    trainer = x = y = None
    gc.collect()
    torch.cuda.empty_cache()
    return ok


def find_max_batch(args, policy, tf32):
    """Doubles from --batch-size until a batch does not fit, then bisects to within
    max(8, 1/16) of the largest that fits (or stops at --max-batch-limit / the time budget)."""
    deadline = time.monotonic() + args.max_batch_seconds
    lo, hi = 0, None
    b = args.batch_size
    while hi is None:
        if b > args.max_batch_limit or time.monotonic() > deadline:
            break
        if fits(args, policy, tf32, b):
            lo, b = b, 2 * b
        else:
            hi = b
    while hi is not None and hi - lo > max(8, lo // 16) and time.monotonic() < deadline:
        mid = (lo + hi) // 2 // 8 * 8 or (lo + hi) // 2
        if fits(args, policy, tf32, mid):
            lo = mid
        else:
            hi = mid
    row = base_row(args, "torch-eager", policy, tf32)
    row.pop("batch_size")
    if hi is None:
        row["search_stopped"] = "time budget or batch limit reached before any batch failed"
    row.update({"max_batch_size": lo, "first_failing_batch_size": hi,
                "max_batch_search": "2 eager steps per trial; doubling from %d, then bisection; limit %d, %d s" % (
                    args.batch_size, args.max_batch_limit, args.max_batch_seconds)})
    return row


# ---- command line ----

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="efficientnet-b0",
                   help="efficientnet-b0 .. efficientnet-b7, resnet50 or cnn")
    p.add_argument("--input-size", type=int, help="square image side (default 224; cnn 28)")
    p.add_argument("--channels", type=int, help="image channels (default 3; cnn 1)")
    p.add_argument("--classes", type=int, help="default 1000; cnn 10")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5, help="untimed steps; the first step is never timed")
    p.add_argument("--policies", default="float32,mixed_float16,mixed_bfloat16")
    p.add_argument("--tf32", choices=["off", "on", "both"], default="off",
                   help="float32 rows on CUDA: TF32 off (true FP32), on, or one row of each")
    p.add_argument("--compile", action="store_true", help="also time torch.compile (torch >= 2)")
    p.add_argument("--no-eager", action="store_true", help="only torch.compile rows")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True,
                   help="NHWC memory format for the model and the images (default on)")
    p.add_argument("--scaling", choices=["seed", "paper"], default="paper",
                   help="EfficientNet compound scaling (efficientnet_seed.py): paper (default) builds "
                        "what mixprec's applications::efficientnet() builds, seed the seed's code; "
                        "B0 is the same network under both")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--find-max-batch", action="store_true",
                   help="instead of timing: the largest batch each policy trains (CUDA, eager)")
    p.add_argument("--max-batch-limit", type=int, default=16384)
    p.add_argument("--max-batch-seconds", type=int, default=150, help="time budget per policy")
    p.add_argument("--require-optimised-blas", action="store_true",
                   help="on the CPU: stop when torch runs on the reference BLAS (cpu_blas.py)")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    size, channels, classes = defaults(args.model)
    args.input_size = args.input_size or size
    args.channels = args.channels or channels
    args.classes = args.classes or classes
    if args.steps < 1:
        p.error("--steps must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch %s sees no CUDA device" % torch.__version__)
    if args.find_max_batch and args.device != "cuda":
        p.error("--find-max-batch needs --device cuda")
    return args


def print_row(r):
    name = r["policy"] + ("+tf32" if r.get("tf32") else "")
    if "unsupported" in r:
        print("%-14s %-19s unsupported: %s" % (r["system"], name, r["unsupported"]))
    elif "max_batch_size" in r:
        print("%-14s %-19s largest batch %d (first failing %s)" % (
            r["system"], name, r["max_batch_size"], r["first_failing_batch_size"]))
    else:
        extra = "  compile %.1f s" % r["compile_s"] if "compile_s" in r else ""
        tflops = "  %6.2f TFLOP/s" % r["tflops"] if "tflops" in r else ""
        print("%-14s %-19s batch %5d  median %8.2f ms  %9.1f images/s%s  peak %.2f GiB%s" % (
            r["system"], name, r["batch_size"], r["step_ms"]["median"], r["samples_per_s"], tflops,
            r["peak_memory_bytes"] / 2**30, extra))
    sys.stdout.flush()


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    cpu_peer = None if cuda else cpu_blas.describe(torch)
    if cpu_peer is not None and args.require_optimised_blas:
        cpu_blas.require_optimised(cpu_peer)
    if cuda:
        # Fixed shapes: let cuDNN time its algorithms and keep the fastest. Not while searching the
        # largest batch: every trial batch would be autotuned again (minutes); the default
        # heuristics' choice is used there.
        torch.backends.cudnn.benchmark = not args.find_max_batch
    policies = args.policies.split(",")
    for policy in policies:
        autocast_dtype(policy)  # KeyError for an unknown name
    tf32_modes = {"off": [False], "on": [True], "both": [False, True]}[args.tf32]
    configs = [(policy, tf32) for policy in policies
               for tf32 in (tf32_modes if policy == "float32" and cuda else [False])]
    probe = build_model(args)
    trainable, with_moving = efficientnet_seed.parameter_counts(probe)
    flops, cross_checked = forward_flops(probe, args)
    del probe
    rows = []
    if args.find_max_batch:
        for policy, tf32 in configs:
            rows.append(find_max_batch(args, policy, tf32))
            print_row(rows[-1])
    else:
        systems = ([] if args.no_eager else ["torch-eager"]) + (["torch-compile"] if args.compile else [])
        for system in systems:
            for policy, tf32 in configs:
                rows.append(run(args, system, policy, tf32, flops))
                print_row(rows[-1])
    if args.json:
        out = {"torch_version": torch.__version__, "threads": args.threads, "device": args.device,
               "device_name": torch.cuda.get_device_name() if cuda else None,
               "workload": {"model": args.model, "input_size": args.input_size, "channels": args.channels,
                            "classes": args.classes, "batch_size": args.batch_size, "optimizer": "adam",
                            "learning_rate": 1e-3, "loss": "sparse_categorical_crossentropy (float32)",
                            "steps": args.steps, "warmup": args.warmup, "channels_last": args.channels_last,
                            "cudnn_benchmark": cuda, "params": trainable,
                            "params_with_bn_moving_stats": with_moving,
                            "forward_flops_per_sample": flops,
                            "flops_cross_checked_with_FlopCounterMode": cross_checked},
               "results": rows}
        if not cuda:
            out["cpu_peer"] = cpu_peer  # BLAS library, its matmul time, CPU model (cpu_blas.py)
        if args.model.startswith("efficientnet"):
            out["workload"]["efficientnet_scaling"] = args.scaling
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
