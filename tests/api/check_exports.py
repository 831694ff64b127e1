#!/usr/bin/python3
"""libqhost.so exports the embedding API of qhost.h and nothing else.

Reads the defined dynamic symbols with `nm -D --defined-only` and fails when any is not
a qhost_* name, when a function qhost.h declares (QHOST_API) is not exported, or when an
exported qhost_* name is not declared there. --expect-failure TEXT inverts the verdict,
so the checker is itself checked on libraries it must refuse (one exporting a qh_* name,
and a plugin, whose one export qhost.h does not declare).
"""
import argparse
import re
import subprocess
import sys


def exported(nm, lib):
    out = subprocess.run([nm, "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            names.add(parts[2].split("@")[0])
    return names


def declared(header):
    text = open(header, encoding="utf-8").read()
    return set(re.findall(r"^QHOST_API\b[^;]*?\b(qhost_\w+)\s*\(", text, re.M | re.S))


def problems(exports, declarations):
    found = []
    for name in sorted(exports):
        if not name.startswith("qhost_"):
            found.append(f"exports {name}, which is not part of the API (qhost_*)")
        elif name not in declarations:
            found.append(f"exports {name}, which qhost.h does not declare")
    for name in sorted(declarations - exports):
        found.append(f"qhost.h declares {name}, which the library does not export")
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nm", required=True)
    ap.add_argument("--header", required=True)
    ap.add_argument("--expect-failure", metavar="TEXT",
                    help="the library must be refused with a problem containing TEXT")
    ap.add_argument("library")
    args = ap.parse_args()
    declarations = declared(args.header)
    if len(declarations) < 40:
        print(f"{args.header}: only {len(declarations)} QHOST_API functions found; the parser is broken")
        return 1
    found = problems(exported(args.nm, args.library), declarations)
    for p in found:
        print(f"{args.library}: {p}")
    if args.expect_failure:
        refused = any(args.expect_failure in p for p in found)
        print("refused, as it must be" if refused else f"not refused with '{args.expect_failure}'")
        return 0 if refused else 1
    print(f"{args.library}: {len(declarations)} functions, all exported, nothing else" if not found else "")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
