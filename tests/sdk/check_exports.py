#!/usr/bin/python3
"""Check that qhost plugins export exactly one dynamic symbol, qhost_plugin_init.

Every plugin named on the command line, and every libqhost-*.so found in --dir, must
exist and `nm -D --defined-only` must list qhost_plugin_init and nothing else: the SDK's
version script and hidden visibility keep the rest local (ABI rule B3).

Usage: check_exports.py [--nm NM] [--dir DIR] [PLUGIN.so ...]
"""
import argparse
import glob
import os
import subprocess
import sys

ENTRY = "qhost_plugin_init"


def defined_dynamic_symbols(nm, path):
    """The names `nm -D --defined-only` lists for path, without version suffixes."""
    out = subprocess.run([nm, "-D", "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        fields = line.split()
        if fields:
            names.append(fields[-1].split("@")[0])
    return names


def export_problem(nm, path):
    """None when path exports exactly ENTRY, else a one-line description."""
    if not os.path.isfile(path):
        return f"{path}: missing"
    try:
        names = defined_dynamic_symbols(nm, path)
    except subprocess.CalledProcessError as e:
        return f"{path}: nm failed: {e.stderr.strip()}"
    if names != [ENTRY]:
        shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
        return f"{path}: exports [{shown}], expected exactly {ENTRY}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nm", default="nm")
    parser.add_argument("--dir", help="also check every libqhost-*.so in this directory")
    parser.add_argument("plugins", nargs="*")
    args = parser.parse_args()

    paths = [os.path.abspath(p) for p in args.plugins]
    if args.dir:
        for path in sorted(glob.glob(os.path.join(args.dir, "libqhost-*.so"))):
            if os.path.abspath(path) not in paths:
                paths.append(os.path.abspath(path))
    if not paths:
        print("check_exports: no plugin to check", file=sys.stderr)
        return 1
    problems = [p for p in (export_problem(args.nm, path) for path in paths) if p]
    for problem in problems:
        print(problem, file=sys.stderr)
    for path in paths:
        print(f"{'FAIL' if any(q.startswith(path + ':') for q in problems) else 'ok'}  {path}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
