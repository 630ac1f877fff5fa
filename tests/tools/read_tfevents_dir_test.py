#!/usr/bin/env python3
"""read_tfevents.py on a log directory, as TensorBoard's --logdir takes it: the event files sit in
run subdirectories (logs/train, logs/validation), and the script must find them recursively; a
directory without any is an error, not a silent success.

  read_tfevents_dir_test.py PROGRAM    PROGRAM DIR writes a sample event file into DIR
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
READER = os.path.join(HERE, "read_tfevents.py")


def run_reader(path):
    return subprocess.run([sys.executable, READER, path], capture_output=True, text=True)


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mixprec-tfevents-dir-") as d:
        logs = os.path.join(d, "logs")
        for run in ("train", "validation"):
            os.makedirs(os.path.join(logs, run))
            subprocess.run([argv[0], os.path.join(logs, run)], check=True)
        r = run_reader(logs)
        if r.returncode != 0:
            print("FAIL: exit %d on %s: %s" % (r.returncode, logs, r.stderr), file=sys.stderr)
            return 1
        for run in ("train", "validation"):
            if os.path.join(logs, run) not in r.stdout or "'tag': 'loss'" not in r.stdout:
                print("FAIL: the events of %s are missing:\n%s" % (run, r.stdout), file=sys.stderr)
                return 1
        empty = os.path.join(d, "empty")
        os.makedirs(os.path.join(empty, "train"))
        r = run_reader(empty)
        if r.returncode != 1 or "no event files" not in r.stderr:
            print("FAIL: an empty log directory gave exit %d, stderr %r" % (r.returncode, r.stderr),
                  file=sys.stderr)
            return 1
    print("read_tfevents: log directories are read recursively")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
