#!/usr/bin/python3
"""Build example_vitis the way a vendor builds it: from the installed SDK only.

Installs the qhost build tree into a fresh (then moved) prefix, copies
plugins/example_vitis to a scratch directory (so nothing of the repository is in
reach), configures it with -DCMAKE_PREFIX_PATH=<prefix> (find_package(QHost) must find
the installed package), builds it with warnings as errors, runs its own tests
(ctest: the kernels against their scalar twins), then runs the installed runner with
`--plugin-dir <that build>`: `qhost plugins` lists example_vitis from that file,
`qhost plugin-check example_vitis` conforms, and on a hand-made power-of-two QDQ model
(tests/deploy/vitis_models.py) `qhost inspect --backend` claims every unit, `qhost run
--backend` succeeds and `qhost deploy` writes the package.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "tests", "deploy"))
from installed_sdk import Failure, cmake_build, find_built, install_prefix, run, vendor_env  # noqa: E402
import qhtest  # noqa: E402
import vitis_models  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True, help="the qhost build tree to install")
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--ctest", default="ctest")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--libdir", default="lib")
    ap.add_argument("--datadir", default="share")
    ap.add_argument("--bindir", default="bin")
    ap.add_argument("--docdir", default="share/doc/qhost")
    args = ap.parse_args()
    env = vendor_env()
    with tempfile.TemporaryDirectory(prefix="qhost-vitis-build-") as scratch:
        try:
            prefix = install_prefix(args, scratch)
            src = os.path.join(scratch, "example_vitis")
            # the installed example, as a vendor gets it
            shutil.copytree(os.path.join(prefix, args.datadir, "qhost", "examples", "example_vitis"), src)
            build = os.path.join(scratch, "build")
            cmake_build(args, prefix, src, build, env)
            print(run([args.ctest, "--output-on-failure"], cwd=build, env=env).strip().splitlines()[-1])
            plugin = find_built(build, "libqhost-example_vitis.so")
            pdir = os.path.dirname(plugin)
            qhost = os.path.join(prefix, args.bindir, "qhost")
            listing = json.loads(run([qhost, "plugins", "--json", "--plugin-dir", pdir], env=env))
            found = [p for p in listing.get("plugins", []) if p.get("name") == "example_vitis"]
            if len(found) != 1 or os.path.realpath(found[0].get("file", "")) != os.path.realpath(plugin):
                raise Failure(f"qhost plugins lists {found}, not {plugin}")
            # every check passes; the deploy check falls back to its symmetric int8 graph
            check = subprocess.run([qhost, "plugin-check", "--json", "--plugin-dir", pdir,
                                    "example_vitis"], capture_output=True, text=True, env=env)
            report = json.loads(check.stdout)
            failed = [c for c in report["checks"] if c["verdict"] == "FAIL"]
            deploy = [c for c in report["checks"] if c["name"] == "deploy"]
            if failed or check.returncode != 0 or [c["verdict"] for c in deploy] != ["PASS"]:
                raise Failure(f"plugin-check (exit {check.returncode}): failed {failed}, deploy {deploy}")
            print(f"plugin-check: {len(report['checks'])} checks, failed: {failed}")
            # a sanitized host reserves terabytes of shadow memory: no rlimit for it
            top_cache = open(os.path.join(args.build_dir, "CMakeCache.txt"), encoding="utf-8").read()
            r = qhtest.Runner(qhost, re.search(r"^QHOST_SANITIZE:BOOL=(ON|1|TRUE)$", top_cache, re.M) is not None)
            model, x = vitis_models.build(r, scratch)
            backend = ["--backend", "example_vitis", "--plugin-dir", pdir]
            out = run([qhost, "inspect", model] + backend, env=env)
            if "coverage: 12 of 12 node units" not in out:
                raise Failure(f"the out-of-tree plugin does not claim every unit:\n{out}")
            run([qhost, "run", model, "--input", x, "-o", os.path.join(scratch, "y.npy")] + backend,
                env=env)
            run([qhost, "deploy", model, "-o", os.path.join(scratch, "pkg")] + backend, env=env)
            for f in ("manifest.json", "deploy_model.onnx"):  # the latter through ABI 1.1
                if not os.path.isfile(os.path.join(scratch, "pkg", f)):
                    raise Failure(f"deploy wrote no {f}")
        except Failure as e:
            print(f"vitis_build: {e}", file=sys.stderr)
            return 1
    print("vitis_build: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
