"""Installed by ``vramwarden torch enable`` with a ``.pth`` line: starts vramwarden's companion
in processes that import torch, right after torch finishes importing.

It costs one meta-path finder that compares module names; it never imports torch itself, and a
failing companion never breaks the import of torch.
"""

import sys


class _TorchImportHook:
    """A meta-path finder that wraps torch's loader, then removes itself."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        real_exec = loader.exec_module

        def exec_module(module):
            real_exec(module)
            _remove()
            try:
                import vramwarden_torch  # noqa: F401
            except Exception as e:  # never break torch
                print(f"vramwarden_torch: companion not started: {e}", file=sys.stderr)

        loader.exec_module = exec_module
        return spec


def _remove():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _TorchImportHook)]


if "torch" in sys.modules:
    try:
        import vramwarden_torch  # noqa: F401
    except Exception:
        pass
elif not any(isinstance(f, _TorchImportHook) for f in sys.meta_path):
    sys.meta_path.insert(0, _TorchImportHook())
