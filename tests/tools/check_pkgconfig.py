#!/usr/bin/env python3
"""The mixprec.pc this build installs gives a link line that works as pkg-config users write it.

  check_pkgconfig.py PC_TEMPLATE shared|static HAVE_CUDA(0|1)

PC_TEMPLATE is the build's mixprec.pc.install (the prefix still a placeholder). For a shared
library `pkg-config --libs` is -L<libdir> -lmixprec alone (the .so carries oneDNN, OpenMP and the
rest) and `--static` adds the private dependencies; for a static library `pkg-config --libs`,
without --static, already holds every dependency: oneDNN, OpenMP, zlib, and the CUDA libraries
exactly when the build has the CUDA backend.
"""

import os
import shutil
import subprocess
import sys
import tempfile


def libs(pc_dir, static):
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = pc_dir + (":" + env["PKG_CONFIG_PATH"] if env.get("PKG_CONFIG_PATH") else "")
    args = ["pkg-config"] + (["--static"] if static else []) + ["--libs", "mixprec"]
    r = subprocess.run(args, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("FAIL: %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout.split()


def main(argv):
    if len(argv) != 3 or argv[1] not in ("shared", "static") or argv[2] not in ("0", "1"):
        print(__doc__, file=sys.stderr)
        return 2
    if shutil.which("pkg-config") is None:
        print("pkg-config is not installed; nothing to check")
        return 0
    with open(argv[0]) as f:
        text = f.read().replace("@CMAKE_INSTALL_PREFIX@", "/opt/mixprec")
    cuda = argv[2] == "1"
    with tempfile.TemporaryDirectory(prefix="mixprec-pc-") as d:
        with open(os.path.join(d, "mixprec.pc"), "w") as f:
            f.write(text)
        plain, static = libs(d, False), libs(d, True)
    failures = []
    if "-lmixprec" not in plain:
        failures.append("--libs has no -lmixprec: %s" % plain)
    deps = ["-ldnnl", "-fopenmp", "-lz"]
    if argv[1] == "shared":
        extra = [t for t in plain if t.startswith("-l") and t != "-lmixprec"] + \
                [t for t in plain if t == "-fopenmp"]
        if extra:
            failures.append("a shared libmixprec carries its dependencies, --libs lists %s" % extra)
        for dep in deps:
            if dep not in static:
                failures.append("--static --libs has no %s: %s" % (dep, static))
    else:
        for dep in deps:
            if dep not in plain:
                failures.append("a static libmixprec needs %s on the link line; --libs gives %s"
                                % (dep, plain))
    has_cudart = "-lcudart" in (static if argv[1] == "shared" else plain)
    if has_cudart != cuda:
        failures.append("-lcudart %s, but this build %s the CUDA backend"
                        % ("listed" if has_cudart else "missing", "has" if cuda else "has not"))
    for failure in failures:
        print("FAIL: " + failure, file=sys.stderr)
    if not failures:
        print("mixprec.pc (%s): --libs %s" % (argv[1], " ".join(plain)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
