#!/usr/bin/python3
"""The suite's closing line: how many tests passed, failed and were skipped, and why.

ctest's own summary counts a skipped test (exit 77, SKIP_RETURN_CODE) among the passed
("100% tests passed") and lists it apart without its reason. This reads the JUnit file
of a run (`ctest --output-junit FILE`) and prints every skipped test with the reason its
output gave (the last line starting with SKIP), the fixtures and harness checks (labels
`fixture`, `harness`: steps that prepare data for other tests, checks of the test harness
itself) apart, and one closing line

    LABEL: N passed, N failed, N skipped

Exit status 0; reading the file is all it does (tools/test.sh keeps ctest's status).
"""
import argparse
import json
import subprocess
import sys
import xml.etree.ElementTree as ET


def skip_reason(case):
    out = case.findtext("system-out") or ""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip().upper().startswith("SKIP")]
    return lines[-1] if lines else "no reason printed"


def fixture_names(ctest, build):
    """The tests labelled fixture or harness in the build tree, from ctest's JSON listing."""
    out = subprocess.run([ctest, "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True)
    names = set()
    for test in json.loads(out.stdout or "{}").get("tests", []):
        for prop in test.get("properties", []):
            if prop.get("name") == "LABELS" and {"fixture", "harness"} & set(prop.get("value", [])):
                names.add(test["name"])
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("junit", help="the file ctest --output-junit wrote")
    ap.add_argument("--label", default="tests", help="one word naming the run (plain, asan)")
    ap.add_argument("--build", required=True, help="the build tree the tests ran in")
    ap.add_argument("--ctest", default="ctest")
    args = ap.parse_args()
    fixtures = fixture_names(args.ctest, args.build)
    try:
        cases = ET.parse(args.junit).getroot().iter("testcase")
    except (OSError, ET.ParseError) as e:
        print(f"{args.junit}: cannot read the test results: {e}", file=sys.stderr)
        return 0
    passed, failed, skipped, prepared = 0, [], [], 0
    for case in cases:
        name, status = case.get("name"), case.get("status", "")
        if case.find("skipped") is not None or status in ("notrun", "disabled"):
            skipped.append((name, skip_reason(case)))
        elif case.find("failure") is not None or case.find("error") is not None or status == "fail":
            failed.append(name)
        elif name in fixtures:
            prepared += 1
        else:
            passed += 1
    for name, why in skipped:
        print(f"skipped: {name}: {why}")
    for name in failed:
        print(f"failed: {name}")
    if prepared:
        print(f"fixtures: {prepared} fixtures and harness checks passed (not counted below)")
    print(f"{args.label}: {passed} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
