"""Shared plumbing of the ABI test drivers (test_loader.py, test_faults.py): argument
parsing (one ctest per case through --case, names through --list), running qhost
with a controlled environment, and reading `qhost plugins --json` and
`qhost plugin-check` output.

Every case runs in its own temporary directory, which is also qhost's working
directory, so nothing depends on where ctest was started. The environment is cleaned
of the plugin knobs a developer may have set (QHOST_PLUGIN_PATH, QHOST_TEST_FAULT,
...) and gets a 2 s scan timeout so the hang cases stay short.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import traceback

SCAN_TIMEOUT = 2  # seconds, QHOST_PLUGIN_SCAN_TIMEOUT for every run
ASAN_DEFAULTS = "detect_leaks=1:abort_on_error=0"
CLEARED = ("QHOST_PLUGIN_PATH", "QHOST_TEST_FAULT", "QHOST_SCAN_SUBPROCESS",
           "QHOST_PLUGIN_SCANNER", "QHOST_PLUGIN_NO_DLCLOSE", "QHOST_PLUGIN_SCAN_TIMEOUT")
CRASH_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error", "Segmentation",
                 "GLib-CRITICAL", "GLib-ERROR", "assertion")


class Skip(Exception):
    """Raised by a case that does not apply to this build (exit status 77)."""


class Env:
    """What a case needs: the qhost binary, the built test plugins, a temp dir."""

    def __init__(self, qhost, plugins, asan, tmp):
        self.qhost = qhost
        self.plugin_root = plugins
        self.asan = asan
        self.tmp = tmp

    def plugin_dir(self, case):
        """The directory holding one case's plugin (--plugin-dir takes it)."""
        d = os.path.realpath(os.path.join(self.plugin_root, case))
        assert os.path.isdir(d), f"{d}: not built (run the build first)"
        return d

    def plugin(self, case):
        """The path of the single libqhost-*.so in a case's directory."""
        d = self.plugin_dir(case)
        files = [f for f in os.listdir(d) if f.startswith("libqhost-") and f.endswith(".so")]
        assert len(files) == 1, f"{d}: expected one plugin, found {files}"
        return os.path.join(d, files[0])

    def run(self, *args, env=None, cwd=None, timeout=40):
        """qhost ARGS in the case's temp dir; returns (rc, stdout, stderr)."""
        full = {k: v for k, v in os.environ.items() if k not in CLEARED}
        full["QHOST_PLUGIN_SCAN_TIMEOUT"] = str(SCAN_TIMEOUT)
        if self.asan:
            # keep what ctest set for this case (handle_segv=0 for the crash case)
            given = os.environ.get("ASAN_OPTIONS", "")
            full["ASAN_OPTIONS"] = ":".join(x for x in (ASAN_DEFAULTS, given) if x)
            full.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
            # leak reports need the plugin's symbols, so keep plugins mapped
            full["QHOST_PLUGIN_NO_DLCLOSE"] = "1"
        full.update(env or {})

        def no_core():
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        proc = subprocess.run([self.qhost] + [str(a) for a in args], env=full,
                              cwd=cwd or self.tmp, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, preexec_fn=no_core, timeout=timeout)
        return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
                proc.stderr.decode("utf-8", "replace"))

    def plugins_json(self, *args, env=None, cwd=None):
        """`qhost plugins --json ARGS`: (parsed JSON, warning lines from stderr)."""
        rc, out, err = self.run("plugins", "--json", *args, env=env, cwd=cwd)
        check_no_crash(rc, err)
        assert rc == 0, f"qhost plugins: exit {rc}; stderr:\n{err}"
        data = json.loads(out)
        assert data.get("schema_version") == 1, out
        assert isinstance(data.get("plugins"), list) and isinstance(data.get("problems"), list), out
        return data, warnings(err)

    def plugin_check(self, *args, env=None, expect_rc=None):
        """`qhost plugin-check ARGS`: (rc, report lines, stdout, stderr)."""
        rc, out, err = self.run("plugin-check", *args, env=env)
        check_no_crash(rc, err)
        if expect_rc is not None:
            assert rc == expect_rc, (f"qhost plugin-check {' '.join(map(str, args))}: exit {rc}, "
                                     f"expected {expect_rc}\nstdout:\n{out}\nstderr:\n{err}")
        return rc, out.splitlines(), out, err


def warnings(stderr):
    """The text of each `qhost: warning: ...` line."""
    prefix = "qhost: warning: "
    return [ln[len(prefix):] for ln in stderr.splitlines() if ln.startswith(prefix)]


def check_no_crash(rc, err):
    assert rc >= 0, f"qhost died from signal {-rc}; stderr:\n{err}"
    for marker in CRASH_MARKERS:
        assert marker not in err, f"stderr contains {marker!r}:\n{err}"


def listed(data, name):
    """The entry of `qhost plugins --json` for a plugin name, or None."""
    found = [p for p in data["plugins"] if p.get("name") == name]
    assert len(found) <= 1, f"plugin {name} listed twice: {found}"
    return found[0] if found else None


def check_lines(lines, verdict):
    """(name, detail) of every report line with this verdict ("  FAIL  name: detail")."""
    pat = re.compile(r"^  " + verdict + r"  ([^:]+): (.*)$")
    return [m.groups() for m in map(pat.match, lines) if m]


def main(cases, description):
    """Entry point of a driver: cases maps a name to f(env)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--qhost", help="the qhost binary")
    ap.add_argument("--plugins", help="the built test plugins (tests/abi/plugins in the build tree)")
    ap.add_argument("--asan", action="store_true", help="the build is sanitized")
    ap.add_argument("--case", action="append", help="run only this case (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    opts = ap.parse_args()
    if opts.list:
        print(";".join(cases))
        return 0
    if not opts.qhost or not opts.plugins:
        ap.error("--qhost and --plugins are required")
    names = opts.case or list(cases)
    failed, skipped = [], []
    for name in names:
        if name not in cases:
            print(f"unknown case {name}", file=sys.stderr)
            return 2
        tmp = os.path.realpath(tempfile.mkdtemp(prefix=f"qhost-abi-{name}-"))
        try:
            cases[name](Env(os.path.abspath(opts.qhost), os.path.abspath(opts.plugins),
                            opts.asan, tmp))
            print(f"PASS {name}")
        except Skip as why:
            skipped.append(name)
            print(f"SKIP {name}: {why}")
        except Exception:  # every failure is reported with its case name
            failed.append(name)
            print(f"FAIL {name}\n{traceback.format_exc()}", file=sys.stderr)
        finally:
            if not opts.keep:
                shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        print(f"{len(failed)} of {len(names)} failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 77 if skipped and len(skipped) == len(names) else 0
