"""python3 -m mixprec info: the devices, what this build contains, and the recommended policy
(as the command line's `mixprec info`)."""

import sys


def main(argv):
    if len(argv) != 1 or argv[0] not in ("info", "--version"):
        print("usage: python3 -m mixprec info | --version", file=sys.stderr)
        return 2
    import mixprec

    if argv[0] == "--version":
        print("mixprec", mixprec.__version__)
    else:
        print(mixprec.info(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
