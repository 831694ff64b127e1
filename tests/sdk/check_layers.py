#!/usr/bin/python3
"""The host's folders keep their data-flow order, and only the gateway calls plugins.

framework/'s folders, lowest first (docs/design.md, "Folders and arrows"):

  core < io < exec < hostapi < plugin < backend < quant < lower < conformance < flows < api < cli

(a) A file may include headers of its own folder and of folders before it, never of
    one after it: `#include "F/..."` in framework/G/ needs order(F) <= order(G).
    Headers of the SDK (qhost/...) and the generated onnx/ code are below everything;
    the embedding header framework/qhost.h sits above every folder. A folder missing
    from the order is an error too, so a new one has to be placed.
(b) Only framework/backend/ calls a plugin's callbacks:
    - no call `->NAME(` / `.NAME(` outside it where NAME is a callback member of the
      SDK's structs (sdk/include/qhost/plugin.h, types.h) and no host interface in
      framework/ declares a member of that name (the host's own observer and op
      classes also have run, observe, merge, save, create, load);
    - no use of the host table, qh_host_api_get(), outside backend/ and hostapi/
      (which defines it): every callback but destroy takes the table, so a call site
      that bypasses the gateway needs it. The one exception is plugin/loader.c, which
      hands the table to the plugin's entry point (not a descriptor callback).

Before checking the tree it checks itself on planted violations, so it cannot pass by
matching nothing. Exit 0 when clean, 1 with one line per violation.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FRAMEWORK = os.path.join(ROOT, "framework")
SDK = os.path.join(ROOT, "sdk", "include", "qhost")

ORDER = ["core", "io", "exec", "hostapi", "plugin", "backend", "quant", "lower", "conformance", "flows", "api",
         "cli"]
BELOW_ALL = {"qhost", "onnx"}  # the plugin SDK's headers; code generated from onnx.proto
GATEWAY = "backend"
HOST_TABLE_HOME = "hostapi"
HOST_TABLE_EXCEPTIONS = {"plugin/loader.c"}  # the entry point receives the table

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/[^"]+"', re.M)
FN_MEMBER = re.compile(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(")
TYPEDEF_FN_MEMBER = re.compile(r"^\s*(?:const\s+)?Qh\w*Fn\s+([A-Za-z_]\w*)\s*;", re.M)
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')


def strip(text):
    """Comments out and string contents emptied, keeping #include lines intact."""
    text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return "\n".join(line if line.lstrip().startswith("#") else STRING.sub('""', line)
                     for line in text.split("\n"))


def members(text):
    text = COMMENT.sub(" ", text)
    names = set(FN_MEMBER.findall(text)) | set(TYPEDEF_FN_MEMBER.findall(text))
    return {n for n in names if n[0].islower()}  # not typedef names (QhDeriveQParamsFn)


def sources(top):
    for d, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.join(d, f)


def folder_of(rel):
    """framework-relative path -> its folder ('' for files at framework/'s top)."""
    parts = rel.split("/")
    return parts[0] if len(parts) > 1 else ""


def include_violations(rel, text):
    here = folder_of(rel)
    if here == "":
        return []  # framework/qhost.h: the embedding header, above every folder
    if here not in ORDER:
        return [f"framework/{rel}: folder '{here}' has no place in the order {' < '.join(ORDER)}"]
    out = []
    for m in INCLUDE.finditer(text):
        there = m.group(1)
        if there in BELOW_ALL or there == here:
            continue
        line = text.count("\n", 0, m.start()) + 1
        if there not in ORDER:
            out.append(f"framework/{rel}:{line}: includes {there}/, which has no place in the order")
        elif ORDER.index(there) > ORDER.index(here):
            out.append(f"framework/{rel}:{line}: {here}/ includes {there}/ (against the order "
                       f"{' < '.join(ORDER)})")
    return out


def callback_violations(rel, text, callbacks):
    here = folder_of(rel)
    if here == GATEWAY:
        return []
    out = []
    call = re.compile(r"(?:->|\.)\s*(" + "|".join(sorted(callbacks)) + r")\s*\(")
    for m in call.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append(f"framework/{rel}:{line}: calls the plugin callback {m.group(1)} outside "
                   f"framework/{GATEWAY}/")
    if here != HOST_TABLE_HOME and rel not in HOST_TABLE_EXCEPTIONS:
        for m in re.finditer(r"\bqh_host_api_get\s*\(", text):
            line = text.count("\n", 0, m.start()) + 1
            out.append(f"framework/{rel}:{line}: takes the host table (qh_host_api_get) outside "
                       f"framework/{GATEWAY}/: call the plugin through the gateway")
    return out


def callback_names():
    sdk = set()
    for name in ("plugin.h", "types.h"):
        with open(os.path.join(SDK, name), encoding="utf-8") as f:
            sdk |= members(f.read())
    host = set()
    for path in sources(FRAMEWORK):
        with open(path, encoding="utf-8") as f:
            host |= members(f.read())
    return sdk, sdk - host


def self_test(callbacks):
    """Planted violations must all be reported; clean lines must not be."""
    planted = [
        ("exec/plan.c", '#include "plugin/plugin.h"\n', include_violations),
        ("plugin/loader.c", '#include "quant/flow.h"\n', include_violations),
        ("hostapi/host-graph.c", '#include "lower/deploy-model.h"\n', include_violations),
        ("newfolder/x.c", '#include "core/graph.h"\n', include_violations),
        ("quant/flow.c", "  st = f->annotate->annotate(f->instance, h, view);\n", None),
        ("cli/deploy.c", "  d->deploy->deploy (inst, h, view, &a);\n", None),
        ("lower/kernel-node.c", "  QhStatus *st = ops->reshape(k, h, in, 1, &o, 1, &ws);\n", None),
        ("quant/plugin-observer.c", "  QhStatus *st = po->ops->observe(po->state, qh_host_api_get(), &v);\n",
         None),
        ("plugin/registry.c", "  d->instance_destroy(instance);\n", None),
    ]
    clean = [
        ("lower/lowering.c", '#include "backend/backend.h"\n#include "exec/plan.h"\n', include_violations),
        ("quant/observer.c", "  return obs->klass->observe(obs, x, error);\n", None),
        ("backend/backend.c", "  st = a->annotate(b->instance, qh_host_api_get(), view);\n", None),
        ("cli/run.c", '  puts("->annotate(");\n', None),
    ]
    problems = []
    for rel, text, fn in planted:
        got = fn(rel, strip(text)) if fn else callback_violations(rel, strip(text), callbacks)
        if not got:
            problems.append(f"self-test: the planted violation in {rel} was not reported: {text.strip()}")
    for rel, text, fn in clean:
        got = fn(rel, strip(text)) if fn else callback_violations(rel, strip(text), callbacks)
        if got:
            problems.append(f"self-test: a clean line in {rel} was reported: {got[0]}")
    return problems


def main():
    sdk, callbacks = callback_names()
    if not {"annotate", "reshape", "instance_destroy", "derive"} <= sdk:
        print(f"FAIL: read no callback members from {SDK} (got {sorted(sdk)})")
        return 1
    problems = self_test(callbacks)
    n_files = 0
    for path in sources(FRAMEWORK):
        rel = os.path.relpath(path, FRAMEWORK).replace(os.sep, "/")
        with open(path, encoding="utf-8") as f:
            text = strip(f.read())
        n_files += 1
        problems += include_violations(rel, text)
        problems += callback_violations(rel, text, callbacks)
    for p in problems:
        print(p)
    if problems:
        print(f"FAIL: {len(problems)} violation(s) in {n_files} files")
        return 1
    print(f"PASS: {n_files} files; folders in order {' < '.join(ORDER)}; the {len(sdk)} SDK callbacks "
          f"({len(callbacks)} by their own names: {', '.join(sorted(callbacks))}) are called in "
          f"framework/{GATEWAY}/ only")
    return 0


if __name__ == "__main__":
    sys.exit(main())
