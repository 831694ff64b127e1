#!/usr/bin/env python3
"""The Python package's documented install on Debian's python3 with Debian's packages
only: `cmake --install` into a temporary prefix, a venv with --system-site-packages,
`pip install --no-index --no-build-isolation PREFIX/share/qhost/python` (the README's line), then the
example of python/README.md run as written in a copy of the installed examples, with
neither QHOST_LIBRARY nor the source tree in sight (the package finds libqhost through
the path the install wrote). Skips, naming the package, when python3-venv,
python3-setuptools or python3-wheel is not installed."""

import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import qhtest  # noqa: E402

README = os.path.join(ROOT, "python", "README.md")
# the README's example prints this line (the x86 int8 accuracy of the digits model)
WANT = re.compile(r"^int8 accuracy 96\.58%$", re.M)


def readme_example():
    """The first ```python block after the README's "## Example" heading, verbatim."""
    with open(README) as f:
        text = f.read()
    section = text.split("\n## Example", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def readme_install_command():
    """The README's pip command, with VENV and the prefix (/opt/qhost there) to fill in."""
    with open(README) as f:
        text = f.read()
    line = re.search(r"^VENV/bin/pip install .*$", text, re.M).group(0)
    return line


def run(cmd, env, cwd=None, timeout=600):
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def require(module, package):
    if subprocess.run(["/usr/bin/python3", "-c", f"import {module}"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        raise qhtest.Skip(f"{package} is not installed (sh tools/deps.sh --tests installs it)")


def case_venv_readme(runner, tmp):
    require("ensurepip", "python3-venv")
    require("setuptools", "python3-setuptools")
    require("wheel", "python3-wheel")
    build = os.environ.get("QH_BUILD_DIR") or os.path.dirname(runner.qhost)
    cmake = os.environ.get("QH_CMAKE") or shutil.which("cmake")
    # child programs see no trace of the build tree's package or library
    env = {k: v for k, v in os.environ.items()
           if k not in ("QHOST_LIBRARY", "PYTHONPATH", "LD_PRELOAD", "ASAN_OPTIONS", "PIP_USER")}
    prefix, venv = os.path.join(tmp, "prefix"), os.path.join(tmp, "venv")
    run([cmake, "--install", build, "--prefix", prefix], env)
    package = os.path.join(prefix, "share", "qhost", "python")
    libpath = os.path.join(package, "qhost", "_libpath.py")
    with open(libpath) as f:
        assert prefix in f.read(), f"{libpath} does not name the prefix"
    run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], env)
    command = readme_install_command().replace("VENV", venv).replace("/opt/qhost", prefix)
    pip_out = run(["sh", "-c", command], env)
    installed = [ln for ln in pip_out.splitlines() if ln.startswith("Successfully installed")]
    assert installed == ["Successfully installed qhost-0.1.0"], \
        f"pip installed more than the package (all else must come from Debian):\n{pip_out}"
    work = os.path.join(tmp, "digits")
    shutil.copytree(os.path.join(prefix, "share", "qhost", "examples"), work)
    example = readme_example()
    assert len(example.strip().splitlines()) <= 5, "the README's example is more than five lines"
    run_env = dict(env)
    if runner.asan and os.environ.get("QH_ASAN_RUNTIME"):
        run_env.update(LD_PRELOAD=os.environ["QH_ASAN_RUNTIME"], ASAN_OPTIONS="detect_leaks=0")
    out = run([os.path.join(venv, "bin", "python"), "-c", example], run_env, cwd=work)
    print(out.strip())
    assert WANT.search(out), f"the README example printed:\n{out}"
    # it ran the installed copy, through the recorded path
    where = run([os.path.join(venv, "bin", "python"), "-c",
                 "import qhost; print(qhost.__file__); print(qhost.LIBRARY_PATH)"], run_env, cwd=work)
    assert venv in where.splitlines()[0] and prefix in where.splitlines()[1], where


CASES = {"venv_readme": case_venv_readme}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.splitlines()[0]))
