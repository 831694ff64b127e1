#!/usr/bin/python3
"""The documents stand alone: nothing points outside the repository, and every file an
installed document names is installed.

--source: no tracked text file of the repository points at documents it does not
contain (the design brief and research notes the project started from live outside it;
what readers need of them is docs/design.md and docs/numerics.md).

--installed: installs the build tree into a scratch prefix and reads every installed
document (*.md). Each file name it mentions that is one of qhost's files (a name with a
folder qhost has, or a bare name that some file of the repository carries) must exist in
the prefix, where a source path maps to its installed place (docs/ and sdk/docs/ ->
the doc directory, plugins/example_vitis/ and examples/ -> share/qhost/examples/, ...).
Documents installed from docs/ may also name source files by their full path from the
repository root (framework/, tests/, bench/, tools/, the other plugins): they say where
the code behind a statement is. The vendor documents (sdk/docs, the template) may not:
a vendor has the prefix only.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from template_build import Failure, install_prefix  # noqa: E402

# written with brackets so that a grep for these names does not find this file itself
OUTSIDE = re.compile(r"share[d]/|numerics[-]spec|perf[-]anchors|abi[-]and-style|DESIG[N]\.md")
FILE_NAME = re.compile(r"(?<![\w./-])((?:\.\./|PREFIX/)*[\w.-]+(?:/[\w.*-]+)*\.(?:md|c|h|py|js|txt|cmake|in|map|"
                       r"json|onnx|npy|npz|sh|pc|proto))(?![\w/-])")
SOURCE_ONLY = ("framework/", "tests/", "bench/", "tools/", "cmake/", ".ci/", "plugins/fbgemm/",
               "plugins/qnnpack/", "plugins/x86/", "plugins/common/")


def tracked_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def check_source():
    bad = []
    for rel in tracked_files():
        if rel.startswith("tests/ort/node_modules/"):
            continue
        try:
            text = open(os.path.join(ROOT, rel), encoding="utf-8").read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary data (models, arrays) or a file deleted in the work tree
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                bad.append(f"{rel}:{n}: {line.strip()}")
    return bad


def installed_place(ref, args):
    """Where a source-tree path lands in the prefix, or None when it is not a known root."""
    doc, share = args.docdir, f"{args.datadir}/qhost"
    for src, dst in (("sdk/docs/", doc + "/"), ("docs/", doc + "/"),
                     ("sdk/include/", "include/"), ("sdk/template/", share + "/template/"),
                     ("plugins/example_vitis/", share + "/examples/example_vitis/"),
                     ("plugins/example_npu/", share + "/examples/example_npu/"),
                     ("examples/", share + "/examples/")):
        if ref.startswith(src):
            return dst + ref[len(src):]
    return None


def check_installed(args):
    basenames = {os.path.basename(p) for p in tracked_files()}
    with tempfile.TemporaryDirectory(prefix="qhost-docs-") as scratch:
        prefix = install_prefix(args, scratch)
        files = []
        for d, _, names in os.walk(prefix):
            files += [os.path.relpath(os.path.join(d, n), prefix) for n in names]
        docs = sorted(f for f in files if f.endswith(".md"))
        if not docs:
            raise Failure(f"no document installed in {prefix}")
        bad, seen = [], 0
        for doc in docs:
            vendor = not doc.startswith(args.docdir + "/") or \
                os.path.exists(os.path.join(ROOT, "sdk", "docs", os.path.basename(doc)))
            text = open(os.path.join(prefix, doc), encoding="utf-8").read()
            for m in FILE_NAME.finditer(text):
                ref = re.sub(r"^(\.\./|PREFIX/)+", "", m.group(1))
                if "*" in ref:
                    continue
                place = installed_place(ref, args)
                if place is None and ref.startswith(SOURCE_ONLY) and not vendor:
                    continue  # a source-tree reference in a reference document
                if place is None and "/" not in ref and ref not in basenames:
                    continue  # not one of qhost's files (upstream sources, the reader's own files)
                if place is None and "/" in ref and os.path.basename(ref) not in basenames \
                        and not ref.startswith(SOURCE_ONLY):
                    continue  # e.g. pkg/manifest.json: a file the reader's commands write
                seen += 1
                if place is not None:
                    ok = place in files
                else:
                    ok = any(f == ref or f.endswith("/" + ref) for f in files)
                if not ok:
                    bad.append(f"{doc}: names {m.group(1)!r}, which is not installed"
                               + (f" (expected at {place})" if place else ""))
        print(f"{len(docs)} installed documents, {seen} names of qhost's files checked")
        return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["source", "installed"])
    ap.add_argument("--build-dir", help="the qhost build tree to install (installed)")
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--libdir", default="lib")
    ap.add_argument("--datadir", default="share")
    ap.add_argument("--bindir", default="bin")
    ap.add_argument("--docdir", default="share/doc/qhost")
    args = ap.parse_args()
    try:
        bad = check_source() if args.mode == "source" else check_installed(args)
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    for line in bad:
        print(line)
    print("FAIL" if bad else "PASS")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
