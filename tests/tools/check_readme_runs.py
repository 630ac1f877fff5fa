#!/usr/bin/env python3
"""Runs what README.md tells a user to run.

  check_readme_runs.py REPO_ROOT BUILD_DIR

- Every ```cpp block of the README appears, up to whitespace, in one of the example programs
  below, and each of those programs runs to exit status 0 in a fresh directory.
- Every `mixprec ...` line of a ```sh block runs to exit status 0 with the build's mixprec, in
  order, in one fresh directory (so a line may use what an earlier one wrote).
- Every other line of a ```sh block is one this script knows, with the check that runs it
  (OTHER_LINES); a new kind of line fails until it is added there.

Both run on a small Fashion-MNIST written here (MIXPREC_FASHION_MNIST_DIR), so they take seconds.
"""

import gzip
import os
import re
import shlex
import struct
import subprocess
import sys
import tempfile

EXAMPLES = ["quickstart", "training_features", "transformers"]

# Shell lines of the README that are not `mixprec ...`, and what runs them.
OTHER_LINES = [
    (r"^scripts/install-deps\.sh$", "make test/make demo run it first (Makefile: deps)"),
    (r"^cmake -S \. -B build-install ", "make consumer (scripts/ci-consumer.sh) configures so"),
    (r"^cmake --build build-install", "make consumer (scripts/ci-consumer.sh) builds so"),
    (r"^cmake --install build-install --prefix", "make consumer (scripts/ci-consumer.sh) installs so"),
    (r"^export PKG_CONFIG_PATH=", "make consumer: examples/consumer/Makefile with PKG_CONFIG_PATH"),
    (r"^c\+\+ -O2 \$\(pkg-config --cflags mixprec\) .* \$\(pkg-config --libs mixprec\)$",
     "make consumer: examples/consumer/Makefile links with pkg-config --libs, static and shared"),
    (r"^make (build|test|test-asan|consumer|debs|bench|format)$", "Makefile targets (CI runs build, test, test-asan, consumer)"),
]


def blocks(text, language):
    out, current, inside = [], None, False
    for line in text.splitlines():
        fence = re.match(r"^\s*```(\w*)", line)
        if fence and not inside:
            inside, current = True, ([] if fence.group(1) == language else None)
        elif fence and inside:
            if current is not None:
                out.append("\n".join(current))
            inside, current = False, None
        elif inside and current is not None:
            current.append(line)
    return out


def normalized(code):
    """The code without whitespace: a README block may wrap its lines differently."""
    return "".join(code.split())


def shell_lines(block):
    """Commands of a shell block: continuation lines joined, comments and blanks dropped."""
    lines, pending = [], ""
    for raw in block.splitlines():
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        pending = ""
        line = re.sub(r"\s+#.*$", "", line).strip()  # a trailing comment
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def write_idx(path, dims, data):
    with gzip.open(path, "wb") if path.endswith(".gz") else open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 8, len(dims)))
        for d in dims:
            f.write(struct.pack(">I", d))
        f.write(bytes(data))


def tiny_fashion_mnist(directory, train, test):
    """Images whose label is written into them (two bright rows), so a model learns it fast."""
    os.makedirs(directory, exist_ok=True)
    noise = 12345

    def make(n):
        nonlocal noise
        images, labels = bytearray(n * 784), bytearray(n)
        for i in range(n):
            label = i % 10
            labels[i] = label
            for p in range(784):
                noise = (noise * 1103515245 + 12345) & 0xFFFFFFFF
                images[i * 784 + p] = (noise >> 16) % 40
            for p in range(2 * label * 28, (2 * label + 2) * 28):
                images[i * 784 + p] = 255
        return images, labels

    images, labels = make(train)
    write_idx(os.path.join(directory, "train-images-idx3-ubyte.gz"), [train, 28, 28], images)
    write_idx(os.path.join(directory, "train-labels-idx1-ubyte.gz"), [train], labels)
    images, labels = make(test)
    write_idx(os.path.join(directory, "t10k-images-idx3-ubyte.gz"), [test, 28, 28], images)
    write_idx(os.path.join(directory, "t10k-labels-idx1-ubyte.gz"), [test], labels)


def run(args, cwd, env, what, failures):
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        failures.append("%s: exit %d\n%s%s" % (what, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    else:
        print("ran: %s" % what)


def configure_fetchcontent(repo, block, directory, failures):
    """A project that pulls mixprec in as the README's FetchContent block does, configured (not
    built): the target mixprec::mixprec must exist for the generate step to pass."""
    os.makedirs(directory)
    with open(os.path.join(directory, "main.cpp"), "w") as f:
        f.write("#include <mixprec/mixprec.h>\nint main() { return mixprec::version()[0] == 0; }\n")
    with open(os.path.join(directory, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.22)\nproject(my_app LANGUAGES CXX)\n"
                "add_executable(my_app main.cpp)\n" +
                block.replace("/path/to/mixprec", os.path.abspath(repo)) + "\n")
    run(["cmake", "-S", directory, "-B", os.path.join(directory, "build"),
         "-DMIXPREC_CUDA=OFF"], directory, dict(os.environ), "the README's FetchContent project "
        "(configure and generate)", failures)


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    repo, build = (os.path.abspath(p) for p in argv)
    with open(os.path.join(repo, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    failures = []

    sources = {}
    for name in EXAMPLES:
        with open(os.path.join(repo, "examples", name + ".cpp"), encoding="utf-8") as f:
            sources[name] = normalized(f.read())
    for block in blocks(readme, "cpp"):
        if not any(normalized(block) in text for text in sources.values()):
            failures.append("a cpp block of the README is in no example program (%s): %s..."
                            % (", ".join(EXAMPLES), normalized(block)[:120]))
    # Python blocks: in a program of examples/python (the python_*_example tests run them).
    python_dir = os.path.join(repo, "examples", "python")
    python_sources = []
    for name in sorted(os.listdir(python_dir)):
        if name.endswith(".py"):
            with open(os.path.join(python_dir, name), encoding="utf-8") as f:
                python_sources.append(normalized(f.read()))
    for block in blocks(readme, "python"):
        if not any(normalized(block) in text for text in python_sources):
            failures.append("a python block of the README is in no program of examples/python: "
                            "%s..." % normalized(block)[:120])

    mixprec = os.path.join(build, "tools", "mixprec", "mixprec")
    with tempfile.TemporaryDirectory(prefix="mixprec-readme-") as work:
        data = os.path.join(work, "fashion-mnist")
        tiny_fashion_mnist(data, 600, 200)
        env = dict(os.environ, MIXPREC_FASHION_MNIST_DIR=data, OMP_NUM_THREADS="2")
        for name in EXAMPLES:
            exe = os.path.join(build, "examples", name)
            cwd = os.path.join(work, name)
            os.makedirs(cwd)
            if not os.path.isfile(exe):
                failures.append("%s is not built (MIXPREC_BUILD_EXAMPLES)" % exe)
                continue
            run([exe], cwd, env, "examples/%s.cpp" % name, failures)

        cli = os.path.join(work, "cli")
        os.makedirs(cli)
        for block in blocks(readme, "sh"):
            for line in shell_lines(block):
                words = shlex.split(line)
                if words[0] == "mixprec":
                    run([mixprec] + words[1:], cli, env, line, failures)
                elif not any(re.match(pattern, line) for pattern, _ in OTHER_LINES):
                    failures.append("README shell line that no check runs: %s (add it to "
                                    "OTHER_LINES with the check that runs it, or make it a "
                                    "mixprec line)" % line)
        for block in blocks(readme, "cmake"):
            if "FetchContent_Declare" in block:
                configure_fetchcontent(repo, block, os.path.join(work, "fetchcontent"), failures)
            elif "find_package(mixprec" not in block:
                failures.append("README cmake block that no check runs: %s..." % block[:80])
            # find_package: examples/consumer/CMakeLists.txt, built against static and shared
            # installs by make consumer (scripts/ci-consumer.sh).
    for failure in failures:
        print("FAIL: " + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
