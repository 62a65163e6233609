"""vramwarden's companion inside a PyTorch process.

Importing this module starts a daemon thread that serves a private Unix socket at
``$XDG_RUNTIME_DIR/vramwarden/torch-<pid>.sock`` (or ``/tmp/vramwarden-<uid>/`` when
XDG_RUNTIME_DIR is unset). The vramwarden app reads the allocator's figures through it
(allocated, reserved, inactive split, retries, OOMs) and can release the cache
(``torch.cuda.empty_cache()``) or set a memory fraction without stopping the job. Only the same
user or root may talk to it; requests are newline-delimited JSON (no pickle, no eval).

The module uses the standard library only and never imports torch itself: it answers
"torch not imported" until the process imports torch.

Ways to turn it on:

* ``import vramwarden_torch`` in a script;
* ``python -m vramwarden_torch train.py ARGS...`` for one run;
* ``vramwarden torch enable [--python PATH]`` (a ``.pth`` hook that starts it in every process of
  that interpreter that imports torch).

Set ``VRAMWARDEN_TORCH=0`` in the environment to keep it off.

Adjusting the batch size to the memory that is free::

    import torch, vramwarden_torch

    batch = 256
    while batch > 1 and vramwarden_torch.headroom() < batch * bytes_per_sample:
        batch //= 2
    for step in range(steps):
        try:
            train_step(batch)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            batch = max(1, batch // 2)

``headroom(device=None)`` is the bytes this process can still take on that device (the current
one by default): free device memory plus its own releasable cache (reserved - allocated), minus
a margin, within any memory fraction that is set.
"""

from ._server import (  # noqa: F401
    PROTOCOL_VERSION,
    __version__,
    compute_headroom,
    headroom,
    runtime_dir,
    socket_path,
    start,
    stop,
)

import sys as _sys


def _run_as_main():
    """True while ``python -m vramwarden_torch`` imports this package on its way to
    ``__main__``, which checks its arguments and then starts the companion itself (a usage
    error starts none)."""
    argv = getattr(_sys, "orig_argv", [])
    return _sys.argv[:1] == ["-m"] and any(
        a == "-m" and b == __name__ for a, b in zip(argv, argv[1:])
    )


if not _run_as_main():
    start()
