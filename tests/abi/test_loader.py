#!/usr/bin/env python3
"""The plugin loader against real broken plugins: for each way a plugin file can be
wrong (missing, not ELF, not a plugin, failing or crashing or hanging entry point,
foreign ABI versions, corrupt or shrunk descriptors, bad names and text, duplicates),
`qhost plugins` must print the exact one-line warning, keep listing the good plugin
searched alongside, and `qhost plugin-check PATH` must report the same line as a
failed scan. Also: the search path rules (empty QHOST_PLUGIN_PATH entries are not the
current directory), older descriptors that must still load, a plugin built against
the frozen 1.0 headers, backend options, and hidden visibility (one exported symbol).

The expected struct sizes are the x86-64 ABI 1.0 layout (tests/abi/frozen-layout.c);
the descriptor has not grown since. Plugins built here claim the SDK's ABI (HOST_ABI),
the snapshot plugins 1.0 and 1.1 (the same source built against the frozen
sdk-snapshots), and the "too new" one the next minor (NEWER_ABI).
"""

import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abitest import check_lines, listed, main  # noqa: E402

DESC_MIN_SIZE = 36  # QH_PLUGIN_DESC_MIN_SIZE: up to and including flags
DESC_SIZE = 160     # sizeof(QhPluginDesc) of sdk/include: 144 in ABI 1.0 and 1.1, + passes and partitions in 1.2
DESC_SIZE_1_0 = 144  # sizeof(QhPluginDesc) in ABI 1.0 and 1.1
HOST_ABI = "1.2"    # QH_ABI_MAJOR.QH_ABI_MINOR of this host and of sdk/include
NEWER_ABI = "1.3"   # what the abi_minor plugin claims: one minor beyond the host
DESC_SIZE_TO_LOWERING = 128  # offsetof(QhPluginDesc, lowering)

# Plugins that are supposed to be well-formed: they load and export one symbol.
WELL_FORMED = ("good", "faulty", "snapshot", "snapshot11", "snapshot12", "idle", "shrunk", "minimal", "dup_a", "dup_b")


def expect_skipped(env, problem, *search, check=None, run_env=None):
    """`qhost plugins --json --plugin GOOD SEARCH...` warns `problem; skipped` exactly
    once (on stderr and in "problems") and still lists the good plugin; then, with
    check=PATH, `qhost plugin-check PATH` fails its scan with the same text."""
    good = env.plugin("good")
    data, warned = env.plugins_json("--plugin", good, *search, env=run_env)
    line = f"{problem}; skipped"
    assert warned.count(line) == 1, f"want the warning\n  {line}\ngot\n  " + "\n  ".join(warned)
    assert data["problems"].count(line) == 1, f"want {line!r} in problems: {data['problems']}"
    entry = listed(data, "good")
    assert entry is not None, f"the good plugin is not listed: {data['plugins']}"
    assert entry["file"] == os.path.realpath(good), entry
    if check is not None:
        rc, lines, out, _ = env.plugin_check(check, env=run_env, expect_rc=1)
        assert ("scan", problem) in check_lines(lines, "FAIL"), \
            f"plugin-check {check}: want 'FAIL  scan: {problem}'\n{out}"
        assert lines[-1].startswith("conforms: no"), out
    return data


def case_missing_file(env):
    path = "/nonexistent/libqhost-x.so"
    expect_skipped(env, f"{path}: cannot open plugin: No such file or directory", "--plugin", path,
                   check=path)


def case_missing_dependency(env):
    """A plugin whose own dependency is missing: the dynamic loader's text names it."""
    path = env.plugin("needs_dep")
    expect_skipped(env, f"{path}: cannot load plugin: libqhabidep.so: cannot open shared object file: "
                        "No such file or directory", "--plugin-dir", env.plugin_dir("needs_dep"),
                   check=path)


def dlerror_of(path):
    """What the dynamic loader says about a file, asked independently of qhost."""
    try:
        ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as e:
        return str(e)
    raise AssertionError(f"{path} loaded, expected a loader error")


def case_not_shared_object(env):
    path = os.path.join(env.tmp, "libqhost-text.so")
    with open(path, "w") as f:
        f.write("This is a text file that only looks like a plugin by its name.\n" * 20)
    expect_skipped(env, f"{path}: cannot load plugin: {dlerror_of(path)}", "--plugin-dir", env.tmp,
                   check=path)


def case_not_a_plugin(env):
    libm = sorted(glob.glob("/usr/lib/*-linux-gnu/libm.so.6") + glob.glob("/lib/*-linux-gnu/libm.so.6"))
    assert libm, "no libm.so.6 found"
    path = os.path.join(env.tmp, "libqhost-libm.so")
    shutil.copyfile(os.path.realpath(libm[0]), path)
    expect_skipped(env, f"{path}: no symbol qhost_plugin_init: not a qhost plugin",
                   "--plugin-dir", env.tmp, check=path)


def descriptor_case(case, problem):
    """A case whose plugin (built from broken.c) is refused with `path: problem`."""
    def run(env):
        path = env.plugin(case)
        expect_skipped(env, f"{path}: {problem}", "--plugin-dir", env.plugin_dir(case), check=path)
    return run


def case_segv(env):
    path = env.plugin("segv")
    expect_skipped(env, f"{path}: crashed while loading (SIGSEGV)", "--plugin-dir",
                   env.plugin_dir("segv"), check=path)


def case_hang(env):
    path = env.plugin("hang")
    expect_skipped(env, f"{path}: did not answer within 2 s", "--plugin-dir", env.plugin_dir("hang"))


def loads_and_conforms(env, case, name, struct_size):
    """An older descriptor the host must accept: listed with its own struct_size, and
    passing plugin-check (its instance is created and destroyed)."""
    data, warned = env.plugins_json("--plugin-dir", env.plugin_dir(case))
    assert not [w for w in warned if env.plugin_dir(case) in w], warned
    entry = listed(data, name)
    assert entry is not None, f"{name} not listed: {data}"
    assert entry["abi"] == HOST_ABI and entry["struct_size"] == struct_size, entry
    rc, lines, out, _ = env.plugin_check(env.plugin(case), expect_rc=0)
    assert lines[-1].startswith("conforms: yes (") and ", 0 failed" in lines[-1], out
    assert (("descriptor", f"{name} 1.0.0, ABI {HOST_ABI}, struct_size {struct_size}; supplies descriptor only")
            in check_lines(lines, "PASS")), out
    return lines


def case_older_struct_size(env):
    # struct_size stops before `lowering`; the members after it hold wild pointers
    lines = loads_and_conforms(env, "shrunk", "shrunk", DESC_SIZE_TO_LOWERING)
    assert ("instance", "instance_create accepted the options") in check_lines(lines, "PASS"), lines


def case_minimal_descriptor(env):
    # the smallest descriptor any 1.x host accepts, in an object that really ends there
    lines = loads_and_conforms(env, "minimal", "minimal", DESC_MIN_SIZE)
    assert ("instance", "no instance_create (the instance is NULL)") in check_lines(lines, "PASS"), lines


def case_duplicate_name(env):
    a, b = env.plugin_dir("dup_a"), env.plugin_dir("dup_b")
    data, warned = env.plugins_json("--plugin", env.plugin("good"),
                                    env={"QHOST_PLUGIN_PATH": f"{a}:{b}"})
    pa, pb = env.plugin("dup_a"), env.plugin("dup_b")
    line = f"plugin 'dup' in {pb} is shadowed by {pa} (the first in search order wins)"
    assert warned.count(line) == 1, f"want\n  {line}\ngot\n  " + "\n  ".join(warned)
    assert line in data["problems"], data["problems"]
    dup = listed(data, "dup")
    assert dup and dup["file"] == pa and dup["version"] == "1.0.0-a", dup
    assert listed(data, "good"), data


def case_empty_path_entries(env):
    """':A::' searches A only: an empty entry is never the current directory."""
    a = env.plugin_dir("good")
    cwd = os.path.join(env.tmp, "cwd")
    os.mkdir(cwd)
    # what "." would find: a second copy of good (a duplicate would be reported) and a
    # plugin of another name (it would be listed)
    shutil.copy(env.plugin("good"), os.path.join(cwd, "libqhost-good.so"))
    shutil.copy(env.plugin("dup_a"), os.path.join(cwd, "libqhost-dup.so"))
    for value in (f":{a}::", f"{a}:", ":"):
        data, warned = env.plugins_json(env={"QHOST_PLUGIN_PATH": value}, cwd=cwd)
        assert listed(data, "dup") is None, f"QHOST_PLUGIN_PATH={value!r} read the cwd: {data}"
        assert not [w for w in warned if cwd in w], f"QHOST_PLUGIN_PATH={value!r}: {warned}"
        assert not [p for p in data["plugins"] if p["file"].startswith(cwd)], data
        good = listed(data, "good")
        if a in value:
            assert good and good["file"] == env.plugin("good"), data
        else:
            assert good is None, f"QHOST_PLUGIN_PATH={value!r} found good: {data}"


def case_text_listing(env):
    """The text form of the listing, with a broken plugin searched alongside."""
    rc, out, err = env.run("plugins", "--plugin-dir", env.plugin_dir("abi_major"),
                           "--plugin", env.plugin("good"))
    assert rc == 0, err
    want = [
        f"good 1.0.0 (ABI {HOST_ABI})",
        "  qhost ABI test plugin (good)",
        f"  file:     {env.plugin('good')}",
        "  supplies: descriptor only",
        "  --backend-opt level=2  (int in [0, 9]) how hard to try",
    ]
    got = out.splitlines()
    assert got[:len(want)] == want, "want\n" + "\n".join(want) + "\ngot\n" + out
    assert (f"qhost: warning: {env.plugin('abi_major')}: built for qhost ABI 2.0, this host provides {HOST_ABI};"
            " skipped") in err.splitlines(), err


def case_explicit_path_name(env):
    """A file named by path whose descriptor carries another name: `qhost plugins
    --plugin PATH` and `qhost plugin-check PATH` must give the same verdict (an explicit path bypasses the
    file-name pattern: docs/design.md, "The plugin ABI")."""
    path = env.plugin("name_mismatch")
    data, warned = env.plugins_json("--plugin", path)
    accepted = listed(data, "rightname") is not None
    rc, lines, out, _ = env.plugin_check(path)
    assert (rc == 0) == accepted, (f"plugins --plugin {'lists' if accepted else 'refuses'} it, "
                                   f"plugin-check PATH exits {rc}:\n{out}")


def case_name_mismatch(env):
    """In a plugin directory the file name must match the descriptor's name; plugin-check
    by that file's name fails its scan with the same line. (An explicit path is not held
    to the pattern: explicit_path_name.)"""
    path = env.plugin("name_mismatch")
    problem = "descriptor name 'rightname' does not match the file name (want libqhost-rightname.so)"
    d = env.plugin_dir("name_mismatch")
    expect_skipped(env, f"{path}: {problem}", "--plugin-dir", d)
    rc, lines, out, _ = env.plugin_check("wrongname", "--plugin-dir", d, expect_rc=1)
    assert ("scan", f"{path}: {problem}") in check_lines(lines, "FAIL"), out


def case_check_by_name(env):
    """plugin-check NAME finds a broken file by name and fails its scan the same way."""
    path = env.plugin("abi_minor")
    rc, lines, out, _ = env.plugin_check("abiminor", "--plugin-dir", env.plugin_dir("abi_minor"),
                                         expect_rc=1)
    assert ("scan", f"{path}: built for qhost ABI {NEWER_ABI}, this host provides {HOST_ABI}") in check_lines(lines, "FAIL"), out


def case_backend_options(env):
    d = env.plugin_dir("good")
    rc, lines, out, _ = env.plugin_check("good", "--plugin-dir", d, "--backend-opt", "level=7",
                                         expect_rc=0)
    rc, lines, out, _ = env.plugin_check("good", "--plugin-dir", d, "--backend-opt", "level=12",
                                         expect_rc=1)
    assert ("instance", "option 'level' of plugin 'good': '12' is invalid (want an integer in [0, 9])") \
        in check_lines(lines, "FAIL"), out
    rc, lines, out, _ = env.plugin_check("good", "--plugin-dir", d, "--backend-opt", "speed=1",
                                         expect_rc=1)
    assert ("instance", "plugin 'good' has no option 'speed' (valid: level)") in check_lines(lines, "FAIL"), out


def case_snapshot_plugin(env):
    """Built against sdk-snapshots/1.0 only: loads in this host and conforms."""
    path = env.plugin("snapshot")
    data, warned = env.plugins_json("--plugin-dir", env.plugin_dir("snapshot"))
    entry = listed(data, "snapshot")
    assert entry and entry["abi"] == "1.0" and entry["struct_size"] == DESC_SIZE_1_0, data
    assert entry["supplies"] == ["observers", "reference_numerics"], entry
    assert entry["observers"] == ["SnapAbsMax"], entry
    rc, lines, out, _ = env.plugin_check(path, "--backend-opt", "bits=7", expect_rc=0)
    passed = dict(check_lines(lines, "PASS"))
    for name in ("scan", "descriptor", "instance", "observer SnapAbsMax", "observer SnapAbsMax save/load",
                 "observer SnapAbsMax merge", "reference_numerics", "quiet entry point", "quiet callbacks"):
        assert name in passed, f"no PASS for {name}:\n{out}"
    assert passed["observer SnapAbsMax"].startswith("int8 symmetric spec"), out
    assert passed["observer SnapAbsMax merge"] == "two shards merged give the one-pass qparams", out
    assert lines[-1].startswith("conforms: yes"), out


def case_snapshot_versions(env):
    """The same plugin source built against the frozen 1.0 and 1.1 SDKs and against this
    SDK: each loads with its own ABI and gives the same results in this host, check for
    check (the observer's qparams, save/load, merge and the reference numerics), apart
    from the descriptor line that names its version."""
    reports = {}
    for case, abi in (("snapshot", "1.0"), ("snapshot11", "1.1"), ("snapshot12", HOST_ABI)):
        data, _ = env.plugins_json("--plugin-dir", env.plugin_dir(case))
        entry = listed(data, case)
        assert entry and entry["abi"] == abi, data
        assert entry["supplies"] == ["observers", "reference_numerics"], entry
        rc, lines, out, _ = env.plugin_check(env.plugin(case), "--backend-opt", "bits=7", expect_rc=0)
        assert lines[-1].startswith("conforms: yes"), out
        results = [ln for ln in lines if ln.startswith("  ")]
        desc = [ln for ln in results if ln.startswith("  PASS  descriptor: ")]
        size = DESC_SIZE if abi == HOST_ABI else DESC_SIZE_1_0
        assert desc == [f"  PASS  descriptor: {case} 1.0.0, ABI {abi}, struct_size {size}; "
                        "supplies observers, reference_numerics"], out
        reports[case] = [ln for ln in results if ln not in desc]
        assert len(reports[case]) >= 8, out
    for case in ("snapshot11", "snapshot12"):
        assert reports[case] == reports["snapshot"], \
            f"{case} differs from the 1.0 build:\n" + "\n".join(reports[case]) + "\nvs\n" + \
            "\n".join(reports["snapshot"])


def case_checked_nothing(env):
    """A check that looked at nothing is a SKIP with the reason, never a PASS: idle.c's
    annotate quantizes nothing on either built-in graph, so there is nothing to validate
    and no quantized edge to refine."""
    rc, lines, out, _ = env.plugin_check(env.plugin("idle"), expect_rc=0)
    skipped = dict(check_lines(lines, "SKIP"))
    for graph in ("conv_bn_relu", "gemm_relu_add"):
        assert skipped.get(f"annotate on {graph}") == \
            "no spec on this graph (annotate quantized nothing): nothing to validate", out
    assert skipped.get("refine") == "no built-in graph has a quantized edge: refine had nothing to look at", out
    passed = dict(check_lines(lines, "PASS"))
    assert not [n for n in passed if n.startswith("annotate") or n == "refine"], out
    assert lines[-1].startswith("conforms: yes") and "3 skipped" in lines[-1], out


def case_exports(env):
    """Hidden visibility plus QH_PLUGIN_EXPORT: the entry point is the only symbol."""
    for case in WELL_FORMED:
        path = env.plugin(case)
        out = subprocess.run(["nm", "-D", "--defined-only", path], check=True,
                             stdout=subprocess.PIPE).stdout.decode()
        names = [ln.split()[-1] for ln in out.splitlines() if ln.strip()]
        assert names == ["qhost_plugin_init"], f"{path} exports {names}"
        assert re.search(r"^[0-9a-f]+ T qhost_plugin_init$", out, re.M), f"{path}:\n{out}"


CASES = {
    "missing_file": case_missing_file,
    "not_shared_object": case_not_shared_object,
    "not_a_plugin": case_not_a_plugin,
    "missing_dependency": case_missing_dependency,
    "init_fails": descriptor_case("init_fails", "initialisation failed: broken!"),
    "abi_major": descriptor_case("abi_major", f"built for qhost ABI 2.0, this host provides {HOST_ABI}"),
    "abi_minor": descriptor_case("abi_minor", f"built for qhost ABI {NEWER_ABI}, this host provides {HOST_ABI}"),
    "older_struct_size": case_older_struct_size,
    "minimal_descriptor": case_minimal_descriptor,
    "struct_size_small": descriptor_case(
        "size_small", f"corrupt descriptor: struct_size 8 is outside [{DESC_MIN_SIZE}, {DESC_SIZE}] for ABI {HOST_ABI}"),
    "struct_size_large": descriptor_case(
        "size_large",
        f"corrupt descriptor: struct_size {DESC_SIZE + 64} is outside [{DESC_MIN_SIZE}, {DESC_SIZE}] for ABI {HOST_ABI}"),
    "null_callback": descriptor_case(
        "null_callback", "descriptor: observers[0] 'HalfObserver': required callback 'observe' is NULL"),
    "bias_derivation": descriptor_case(
        "bias_derivation", "descriptor: backend_config.patterns[0].dtype_configs[0]: unknown bias_derivation 7"),
    "empty_passes": descriptor_case(
        "empty_passes", "descriptor: passes: neither post_calibration nor post_convert is set"),
    "opaque_partitions": descriptor_case(
        "opaque_partitions", "descriptor: partitions: io_layout must be QH_LAYOUT_ANY, NCHW or NHWC "
        "(opaque layouts belong inside the partition)"),
    "partitions_no_claim": descriptor_case(
        "partitions_no_claim", "descriptor: partitions: required callback 'claim' is NULL"),
    "bad_name": descriptor_case(
        "bad_name", "descriptor: invalid name 'Bad-Name' (want [a-z][a-z0-9_], at most 32 characters)"),
    "bad_utf8": descriptor_case("bad_utf8", "descriptor: description is not valid UTF-8"),
    "name_mismatch": case_name_mismatch,
    "duplicate_name": case_duplicate_name,
    "empty_path_entries": case_empty_path_entries,
    "segv": case_segv,
    "hang": case_hang,
    "text_listing": case_text_listing,
    "explicit_path_name": case_explicit_path_name,
    "check_by_name": case_check_by_name,
    "backend_options": case_backend_options,
    "snapshot_plugin": case_snapshot_plugin,
    "snapshot_versions": case_snapshot_versions,
    "checked_nothing": case_checked_nothing,
    "exports": case_exports,
}

if __name__ == "__main__":
    sys.exit(main(CASES, __doc__))
