"""``python -m vramwarden_torch SCRIPT ARGS...``: run a script with the companion on."""

import os
import runpy
import sys

USAGE = (
    "usage: python -m vramwarden_torch SCRIPT [ARGS...]\n"
    "       python -m vramwarden_torch -m MODULE [ARGS...]\n"
    "Runs SCRIPT (or MODULE) with vramwarden's companion serving this process's PyTorch\n"
    "allocator on $XDG_RUNTIME_DIR/vramwarden/torch-PID.sock (VRAMWARDEN_TORCH=0: off)."
)


def main() -> None:
    # Arguments first: a usage error or --help starts no companion.
    if len(sys.argv) < 2:
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    if sys.argv[1] in ("-h", "--help"):
        print(USAGE)
        sys.exit(0)
    if sys.argv[1] == "-m" and len(sys.argv) < 3:
        print("python -m vramwarden_torch -m: which module?\n" + USAGE, file=sys.stderr)
        sys.exit(2)
    import vramwarden_torch

    vramwarden_torch.start()

    if sys.argv[1] == "-m":
        sys.argv = sys.argv[2:]
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = sys.argv[1:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
        runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
