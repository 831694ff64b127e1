#!/usr/bin/python3
"""Build the installed plugin template out of tree, as a vendor would, and list it.

Installs the qhost build tree into a fresh prefix (then moves the prefix, so the CMake
package and the pkg-config file must find it from their own location), copies
share/qhost/template to a scratch directory and builds it:
  --mode cmake      cmake -DCMAKE_PREFIX_PATH=<prefix>, i.e. find_package(QHost)
  --mode pkgconfig  PKG_CONFIG_PATH=<prefix>/lib/pkgconfig cc $(pkg-config --cflags --libs
                    qhost-plugin) -shared -fPIC template.c -o libqhost-template.so
then checks the plugin exports only qhost_plugin_init, that
`<prefix>/bin/qhost plugins --plugin-dir <dir>` lists `template` (from that file), and that
`qhost plugin-check` finds it conforming. Each run works in its
own temporary directory and removes it.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_exports import export_problem  # noqa: E402
from installed_sdk import Failure, cmake_build, install_prefix, run, vendor_env  # noqa: E402


def build_with_cmake(args, prefix, src, scratch, env):
    build = os.path.join(scratch, "build")
    cmake_build(args, prefix, src, build, env)
    return build


def build_with_pkgconfig(args, prefix, src, env):
    env = dict(env, PKG_CONFIG_PATH=os.path.join(prefix, args.libdir, "pkgconfig"))
    plugins_dir = run(["pkg-config", "--variable=pluginsdir", "qhost-plugin"], env=env).strip()
    want = os.path.join(prefix, args.libdir, "qhost", "plugins")
    if os.path.realpath(plugins_dir) != os.path.realpath(want):
        raise Failure(f"pkg-config pluginsdir is {plugins_dir}, not {want}")
    run(f"{shlex.quote(args.cc)} -Wall -Wextra -Werror $(pkg-config --cflags --libs qhost-plugin)"
        " -shared -fPIC template.c -o libqhost-template.so", shell=True, cwd=src, env=env)
    return src


def check_listed(args, prefix, plugin_dir, env):
    """The installed runner lists the plugin from that directory and finds it conforming."""
    qhost = os.path.join(prefix, args.bindir, "qhost")
    plugin = os.path.join(plugin_dir, "libqhost-template.so")
    out = run([qhost, "plugins", "--plugin-dir", plugin_dir], env=env)
    # The name as a word of its own, not inside the file name libqhost-template.so.
    if not re.search(r"(^|[\s\"'])template($|[\s\"':,])", out, re.M):
        raise Failure(f"{qhost} plugins --plugin-dir {plugin_dir} does not list template:\n{out}")
    listing = json.loads(run([qhost, "plugins", "--json", "--plugin-dir", plugin_dir], env=env))
    found = [p for p in listing.get("plugins", []) if p.get("name") == "template"]
    if len(found) != 1 or os.path.realpath(found[0].get("file", "")) != os.path.realpath(plugin):
        raise Failure(f"qhost plugins --json: expected one template from {plugin}, got {found}")
    run([qhost, "plugin-check", plugin], env=env)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("cmake", "pkgconfig"), required=True)
    parser.add_argument("--build-dir", required=True, help="the qhost build tree to install")
    parser.add_argument("--cmake", default="cmake")
    parser.add_argument("--cc", default="cc")
    parser.add_argument("--nm", default="nm")
    parser.add_argument("--libdir", default="lib")
    parser.add_argument("--datadir", default="share")
    parser.add_argument("--bindir", default="bin")
    parser.add_argument("--docdir", default="share/doc/qhost")
    args = parser.parse_args()

    env = vendor_env()
    with tempfile.TemporaryDirectory(prefix=f"qhost-sdk-{args.mode}-") as scratch:
        try:
            prefix = install_prefix(args, scratch)
            src = os.path.join(scratch, "src")
            shutil.copytree(os.path.join(prefix, args.datadir, "qhost", "template"), src)
            if args.mode == "cmake":
                plugin_dir = build_with_cmake(args, prefix, src, scratch, env)
            else:
                plugin_dir = build_with_pkgconfig(args, prefix, src, env)
            problem = export_problem(args.nm, os.path.join(plugin_dir, "libqhost-template.so"))
            if problem:
                raise Failure(problem)
            check_listed(args, prefix, plugin_dir, env)
        except Failure as e:
            print(f"template_build --mode {args.mode}: {e}", file=sys.stderr)
            return 1
    print(f"template_build --mode {args.mode}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
