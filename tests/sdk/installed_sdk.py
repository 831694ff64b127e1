"""What the out-of-tree build tests share: install the qhost build tree into a fresh prefix
(then move it, so the CMake package and the pkg-config files must find it from their own
location), configure and build a project against that prefix as a vendor or an application
writer would, and run commands so that a failure shows its output in ctest's log.

Used by tests/sdk/template_build.py, tests/sdk/vitis_build.py, tests/api/app_build.py and
tests/lower/test_partition.py.
"""
import os
import re
import shlex
import subprocess


class Failure(Exception):
    pass


def run(cmd, **kwargs):
    """Run cmd; on failure raise with its output, so ctest shows why."""
    shown = cmd if isinstance(cmd, str) else " ".join(shlex.quote(c) for c in cmd)
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise Failure(f"command failed ({proc.returncode}): {shown}\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def vendor_env():
    """The environment minus anything that could point qhost or the build elsewhere."""
    env = dict(os.environ)
    for key in ("QHOST_PLUGIN_PATH", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH", "QHost_DIR"):
        env.pop(key, None)
    return env


def install_moved(args, scratch):
    """Install args.build_dir into scratch/staging, then move it to scratch/prefix."""
    staging = os.path.join(scratch, "staging")
    run([args.cmake, "--install", args.build_dir, "--prefix", staging])
    prefix = os.path.join(scratch, "prefix")
    os.rename(staging, prefix)
    return prefix


def install_prefix(args, scratch):
    """install_moved, then check the plugin SDK is all there (args: libdir, datadir, docdir)."""
    prefix = install_moved(args, scratch)
    expected = [
        "include/qhost/qhost-plugin.h",
        "include/qhost/abi.h",
        f"{args.datadir}/qhost/qhost-plugin.map",
        f"{args.datadir}/qhost/template/template.c",
        f"{args.libdir}/cmake/QHost/QHostConfig.cmake",
        f"{args.libdir}/cmake/QHost/QHostConfigVersion.cmake",
        f"{args.libdir}/cmake/QHost/QhostPlugin.cmake",
        f"{args.libdir}/pkgconfig/qhost-plugin.pc",
        f"{args.libdir}/qhost/plugins",
        f"{args.docdir}/PLUGIN_GUIDE.md",
        f"{args.docdir}/VITIS_TUTORIAL.md",
    ]
    missing = [p for p in expected if not os.path.exists(os.path.join(prefix, p))]
    if missing:
        raise Failure(f"not installed into {prefix}: {', '.join(missing)}")
    return prefix


def cmake_build(args, prefix, src, build, env, cflags="-Wall -Wextra -Werror", linker_flags=None):
    """Configure src into build with -DCMAKE_PREFIX_PATH=prefix, check find_package(QHost)
    found the installed package and not the build tree's, and build it."""
    cmd = [args.cmake, "-S", src, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}",
           f"-DCMAKE_C_COMPILER={args.cc}", f"-DCMAKE_C_FLAGS={cflags}"]
    if linker_flags is not None:
        cmd.append(f"-DCMAKE_EXE_LINKER_FLAGS={linker_flags}")
    run(cmd, env=env)
    cache = open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8").read()
    found = re.search(r"^QHost_DIR:PATH=(.*)$", cache, re.M)
    want = os.path.join(prefix, args.libdir, "cmake", "QHost")
    if not found or os.path.realpath(found.group(1)) != os.path.realpath(want):
        raise Failure(f"find_package(QHost) used {found.group(1) if found else None}, not {want}")
    run([args.cmake, "--build", build, "-j2"], env=env)


def find_built(build, filename):
    """The path of filename somewhere under build."""
    for d, _, files in os.walk(build):
        if filename in files:
            return os.path.join(d, filename)
    raise Failure(f"no {filename} under {build}")
