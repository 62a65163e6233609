"""Tests of the companion as a user runs it: real processes, a real socket, no torch.

Run with ``python3 -m pytest packaging/python/tests`` (``.ci/run`` does). Every test starts its
own Python process with ``XDG_RUNTIME_DIR`` pointing at a private temporary folder, so nothing
here touches the user's own sockets.
"""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent


def run_py(args, runtime, **kw):
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), PYTHONPATH=str(PKG))
    env.pop("VRAMWARDEN_TORCH", None)
    env.update(kw.pop("env", {}))
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=60, **kw)


@pytest.fixture
def runtime(tmp_path):
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    return d


def test_dash_m_without_arguments_is_a_usage_error(runtime):
    r = run_py(["-m", "vramwarden_torch"], runtime)
    assert r.returncode == 2
    assert r.stderr.startswith("usage: python -m vramwarden_torch")
    assert r.stdout == ""
    # A usage error starts no companion.
    assert not (runtime / "vramwarden").exists()


def test_dash_m_help_goes_to_stdout_and_exits_0(runtime):
    r = run_py(["-m", "vramwarden_torch", "--help"], runtime)
    assert r.returncode == 0
    assert "usage: python -m vramwarden_torch SCRIPT" in r.stdout
    assert r.stderr == ""


def test_dash_m_module_without_a_name_is_a_usage_error(runtime):
    r = run_py(["-m", "vramwarden_torch", "-m"], runtime)
    assert r.returncode == 2
    assert "which module" in r.stderr


def test_dash_m_runs_the_script_with_its_arguments_and_exit_code(runtime, tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import os, sys, vramwarden_torch\n"
        "print(sys.argv[1:], os.path.exists(vramwarden_torch.socket_path()))\n"
        "sys.exit(7)\n"
    )
    r = run_py(["-m", "vramwarden_torch", str(script), "a", "b"], runtime)
    assert r.returncode == 7, r.stderr
    assert r.stdout.strip() == "['a', 'b'] True"


def test_the_socket_answers_hello_without_torch(runtime):
    code = (
        "import sys, vramwarden_torch\n"
        "print(vramwarden_torch.socket_path(), flush=True)\n"
        "sys.stdin.read()\n"
    )
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), PYTHONPATH=str(PKG))
    env.pop("VRAMWARDEN_TORCH", None)
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        path = p.stdout.readline().strip()
        deadline = time.monotonic() + 10
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(path)
            s.sendall(b'{"cmd": "hello"}\n{"cmd": "nope"}\nnot json\n')
            f = s.makefile("rb")
            hello, unknown, bad = (json.loads(f.readline()) for _ in range(3))
        assert hello["pid"] == p.pid
        assert hello["torch_imported"] is False
        assert unknown["ok"] is False and "unknown cmd" in unknown["error"]
        assert bad["ok"] is False and "malformed request" in bad["error"]
    finally:
        p.stdin.close()
        p.wait(timeout=10)
    # The process removed its socket at exit.
    assert not os.path.exists(path)


def test_vramwarden_torch_0_keeps_it_off(runtime):
    r = run_py(["-c", "import os, vramwarden_torch; print(os.path.exists(vramwarden_torch.socket_path()))"],
               runtime, env={"VRAMWARDEN_TORCH": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_headroom_arithmetic():
    sys.path.insert(0, str(PKG))
    try:
        from vramwarden_torch._server import compute_headroom
    finally:
        sys.path.remove(str(PKG))
    gib = 1 << 30
    # free 10 GiB + 2 GiB releasable cache - the 2 % margin of 80 GiB (1.6 GiB).
    assert compute_headroom(10 * gib, 80 * gib, 6 * gib, 4 * gib) == 12 * gib - (80 * gib) // 50
    # A memory fraction caps it: 0.1 of 80 GiB = 8 GiB, 4 GiB allocated -> 4 GiB - margin.
    assert compute_headroom(10 * gib, 80 * gib, 6 * gib, 4 * gib, fraction=0.1, margin=0) == 4 * gib
    # Never below zero; the margin is at least 256 MiB on a small device.
    assert compute_headroom(0, 8 * gib, 0, 0) == 0
    assert compute_headroom(gib, 8 * gib, 0, 0) == gib - (256 << 20)


def test_metadata_names_the_license_and_the_readme():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        pytest.skip("tomllib needs Python 3.11")
    meta = tomllib.loads((PKG / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "MIT OR Apache-2.0"
    for f in meta["license-files"]:
        assert (PKG / f).is_file(), f
    assert (PKG / meta["readme"]).is_file()
    assert any(c.startswith("Programming Language :: Python :: 3") for c in meta["classifiers"])
    sys.path.insert(0, str(PKG))
    try:
        import vramwarden_torch._server as server
    finally:
        sys.path.remove(str(PKG))
    assert meta["version"] == server.__version__
