#!/usr/bin/env python3
"""Which BLAS and which CPU a PyTorch peer on the CPU runs with, for the result files.

Debian's python3-torch links the generic libblas.so.3, which the alternatives system points at
either the reference BLAS (libblas3: a 512x2048x2048 float32 matmul in ~740 ms on 2 cores) or
OpenBLAS (libopenblas0-pthread: ~37 ms). torch.__config__.show() says BLAS_INFO=generic in both
cases, so the library is read from /proc/self/maps after a matmul, and the matmul is timed.

  /usr/bin/python3 bench/peers/cpu_blas.py            # prints the JSON record
  /usr/bin/python3 bench/peers/cpu_blas.py --require-optimised   # exit 1 on the reference BLAS

The peers (torch_cnn.py, torch_mlp.py) call describe() and put its record in their JSON under
"cpu_peer"; with --require-optimised-blas they stop on the reference BLAS.
"""
import argparse
import json
import os
import statistics
import sys
import time

# A matmul slower than this (512x2048x2048 float32, ~4.3 GFLOP) is the reference BLAS' speed on
# any recent x86 CPU: OpenBLAS reaches it in well under a tenth of this on 2 cores.
REFERENCE_BLAS_MS = 400.0
CPU_FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile")


def cpu_model():
    """(model name, flags of interest) from /proc/cpuinfo; (None, []) where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return None, []
    name, flags = None, []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and name is None:
            name = value.strip()
        elif key == "flags" and not flags:
            present = set(value.split())
            flags = [f for f in CPU_FLAGS_OF_INTEREST if f in present]
    return name, flags


def loaded_blas_libraries():
    """Real paths of the mapped BLAS/LAPACK libraries of this process (after a matmul)."""
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split()
                if len(fields) < 6:
                    continue
                path = fields[-1]
                base = os.path.basename(path).lower()
                if ("blas" in base or "lapack" in base or "mkl" in base) and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    return paths


def time_matmul_ms(torch, repeats=3):
    """Median time of a 512x2048 @ 2048x2048 float32 matmul, after one untimed call."""
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(512, 2048, generator=gen)
    b = torch.rand(2048, 2048, generator=gen)
    torch.mm(a, b)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def classify(libraries, matmul_ms):
    """'openblas', 'mkl', 'reference' or 'unknown'. torch calls the generic libblas.so.3, so the
    file mapped under that name decides (its directory: blas/ is the reference BLAS, openblas*/
    OpenBLAS); the library names and then the matmul time decide where no libblas.so is mapped."""
    generic = [p for p in libraries if os.path.basename(p).startswith("libblas.so")]
    for path in generic:
        directory = os.path.basename(os.path.dirname(path)).lower()
        if directory == "blas":
            return "reference"
        if "openblas" in directory:
            return "openblas"
        if "mkl" in directory:
            return "mkl"
    names = " ".join(os.path.basename(p).lower() for p in libraries)
    if "openblas" in names:
        return "openblas"
    if "mkl" in names:
        return "mkl"
    return "reference" if matmul_ms > REFERENCE_BLAS_MS else "unknown"


def describe(torch):
    """The record the peers write: BLAS kind and library paths, matmul time, CPU model."""
    matmul_ms = time_matmul_ms(torch)
    libraries = loaded_blas_libraries()
    name, flags = cpu_model()
    return {"blas": classify(libraries, matmul_ms), "blas_libraries": libraries,
            "matmul_512x2048x2048_ms": round(matmul_ms, 2),
            "torch_threads": torch.get_num_threads(),
            "cpu_model": name, "cpu_flags": flags, "cpu_count": os.cpu_count()}


def require_optimised(record):
    """Raises SystemExit with a one-line reason when the record says reference BLAS."""
    if record["blas"] == "reference":
        raise SystemExit(
            "PyTorch runs on the reference BLAS (%s; 512x2048x2048 matmul %.0f ms): install "
            "libopenblas0-pthread and let libblas.so.3 point at it (update-alternatives "
            "--display libblas.so.3-x86_64-linux-gnu; LD_LIBRARY_PATH must not name .../blas)" % (", ".join(record["blas_libraries"]) or "no BLAS library mapped",
                              record["matmul_512x2048x2048_ms"]))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--require-optimised", action="store_true",
                   help="exit 1 with a message when torch runs on the reference BLAS")
    args = p.parse_args()
    import torch
    record = describe(torch)
    print(json.dumps(record, indent=2))
    if args.require_optimised:
        require_optimised(record)


if __name__ == "__main__":
    sys.exit(main())
