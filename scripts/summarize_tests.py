#!/usr/bin/env python3
"""Counts test functions in a ctest log of Qt Test suites.

usage: summarize_tests.py LABEL RESULTS_DIR [CTEST_STATUS]

RESULTS_DIR holds one Qt Test text log per suite (tests/CMakeLists.txt has
every suite write BUILD/test-results/NAME.txt).

Prints every skipped test function with its reason, then one closing line,
'LABEL: N passed, N failed, N skipped', counting Qt Test functions (each data
row of a data-driven test counts once), not suites. A suite that died before
printing its totals (a crash, a timeout) counts as one failure more. Exits 1
when anything failed or ctest itself failed.
"""
import os
import re
import sys

label, results = sys.argv[1], sys.argv[2]
ctest_status = int(sys.argv[3]) if len(sys.argv) > 3 else 0
text = ""
for name in sorted(os.listdir(results)):
    if name.endswith(".txt"):
        with open(os.path.join(results, name), encoding="utf-8", errors="replace") as f:
            text += f.read() + "\n"

passed = failed = skipped = 0
skips = []
suites_started = len(re.findall(r"^\*+ Start testing of (\S+) \*+", text, re.M))
suites_finished = 0
for m in re.finditer(r"^Totals: (\d+) passed, (\d+) failed, (\d+) skipped", text, re.M):
    passed += int(m.group(1))
    failed += int(m.group(2))
    skipped += int(m.group(3))
    suites_finished += 1
for m in re.finditer(r"^SKIP\s*:\s*(.*)$", text, re.M):
    skips.append(m.group(1).strip())
died = max(0, suites_started - suites_finished)
failed += died

if skips:
    print(f"{label}: skipped test functions:")
    for s in skips:
        print(f"  {s}")
if died:
    print(f"{label}: {died} suite(s) ended before printing their totals (crash or timeout)")
if ctest_status and not failed:
    failed = 1  # ctest failed for a reason the suites did not count
print(f"{label}: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
