#!/usr/bin/python3
"""Build an application against the installed qhost.h and libqhost alone, out of tree.

Installs the qhost build tree into a fresh prefix (then moves the prefix: the CMake
package and the pkg-config file must find it from their own location), checks that the
only host header installed is qhost.h and that it includes nothing but the C library,
copies tests/api/app to a scratch directory and builds it:
  --mode cmake      cmake -DCMAKE_PREFIX_PATH=<prefix>: find_package(QHost), QHost::qhost
  --mode pkgconfig  cc $(pkg-config --cflags --libs qhost) app.c
then runs it on the installed digits example: quantize for example_vitis, a session on
example_vitis's kernels over the test set (accuracy above 90%), and the deploy package.
"""
import argparse
import os
import re
import shlex
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sdk"))
from installed_sdk import Failure, cmake_build, install_moved, run, vendor_env  # noqa: E402


def install_prefix(args, scratch):
    prefix = install_moved(args, scratch)
    for path in ("include/qhost/qhost.h", f"{args.libdir}/pkgconfig/qhost.pc",
                 f"{args.libdir}/cmake/QHost/QHostConfig.cmake"):
        if not os.path.exists(os.path.join(prefix, path)):
            raise Failure(f"not installed into {prefix}: {path}")
    leaked = [d for d in ("core", "io", "exec", "plugin", "quant", "lower", "flows", "api")
              if os.path.exists(os.path.join(prefix, "include", "qhost", d))]
    if leaked:
        raise Failure(f"internal headers installed: include/qhost/{', include/qhost/'.join(leaked)}")
    header = open(os.path.join(prefix, "include", "qhost", "qhost.h"), encoding="utf-8").read()
    includes = re.findall(r"^\s*#\s*include\s*([<\"][^>\"]+[>\"])", header, re.M)
    if sorted(includes) != ["<stddef.h>", "<stdint.h>"]:
        raise Failure(f"qhost.h includes {includes}; only <stddef.h> and <stdint.h> are allowed")
    return prefix


def build_with_cmake(args, prefix, src, scratch, env):
    build = os.path.join(scratch, "build")
    cmake_build(args, prefix, src, build, env, cflags=f"-Wall -Wextra -Werror -pedantic {args.cflags}",
                linker_flags=args.cflags)
    return os.path.join(build, "app")


def build_with_pkgconfig(args, prefix, src, env):
    env = dict(env, PKG_CONFIG_PATH=os.path.join(prefix, args.libdir, "pkgconfig"))
    cflags = run(["pkg-config", "--cflags", "qhost"], env=env)
    if "glib" in cflags:
        raise Failure(f"pkg-config --cflags qhost names GLib: {cflags}")
    run(f"{shlex.quote(args.cc)} -std=c11 -Wall -Wextra -Werror -pedantic {args.cflags} app.c -o app"
        " $(pkg-config --cflags --libs qhost)", shell=True, cwd=src, env=env)
    return os.path.join(src, "app")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("cmake", "pkgconfig"), required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--source-dir", required=True, help="tests/api")
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--cflags", default="", help="extra flags (the sanitizers of an ASan build)")
    ap.add_argument("--libdir", default="lib")
    ap.add_argument("--datadir", default="share")
    args = ap.parse_args()
    env = vendor_env()
    with tempfile.TemporaryDirectory(prefix=f"qhost-app-{args.mode}-") as scratch:
        try:
            prefix = install_prefix(args, scratch)
            src = os.path.join(scratch, "src")
            shutil.copytree(os.path.join(args.source_dir, "app"), src)
            if args.mode == "cmake":
                app = build_with_cmake(args, prefix, src, scratch, env)
            else:
                app = build_with_pkgconfig(args, prefix, src, env)
            work = os.path.join(scratch, "work")
            os.mkdir(work)
            examples = os.path.join(prefix, args.datadir, "qhost", "examples")
            out = run([app, examples, "example_vitis", work], env=env)
            print(out, end="")
            if not os.path.isdir(os.path.join(work, "package")) or not os.listdir(os.path.join(work, "package")):
                raise Failure("the deploy package is missing or empty")
        except Failure as e:
            print(f"app_build --mode {args.mode}: {e}", file=sys.stderr)
            return 1
    print(f"app_build --mode {args.mode}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
