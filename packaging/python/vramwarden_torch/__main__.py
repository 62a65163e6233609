"""``python -m vramwarden_torch SCRIPT ARGS...``: run a script with the companion on."""

import os
import runpy
import sys

import vramwarden_torch  # noqa: F401  (importing it starts the companion)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(
            "usage: python -m vramwarden_torch SCRIPT [ARGS...]\n"
            "       python -m vramwarden_torch -m MODULE [ARGS...]\n"
            "Runs SCRIPT (or MODULE) with vramwarden's companion serving this process's "
            f"PyTorch allocator at {vramwarden_torch.socket_path()}",
            file=sys.stderr,
        )
        sys.exit(2 if len(sys.argv) < 2 else 0)
    if sys.argv[1] == "-m":
        if len(sys.argv) < 3:
            print("python -m vramwarden_torch -m: which module?", file=sys.stderr)
            sys.exit(2)
        sys.argv = sys.argv[2:]
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = sys.argv[1:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
        runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
