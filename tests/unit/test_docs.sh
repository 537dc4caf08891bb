#!/usr/bin/env bash
# Every document the code cites lives in this repository: no file outside
# docs/ names the notes the project was started from, every docs/ file a file
# cites exists, and every section title cited as (docs/<name>.md, "Title") or
# (docs/<name>.md, "A", "B" and "C") is a heading of that file. An example
# ABI header in docs/ABI.md is the header of the emitted file it names.
# Every gen/ and runtime/ (not runtime/emu) C file opens with a comment on
# its role.
# Usage: tests/unit/test_docs.sh [SOURCE_ROOT]
set -u
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
exec python3 - "$root" <<'PY'
import os, re, subprocess, sys

root = sys.argv[1]
# Spelled in pieces so this file does not match itself.
outside = ["hardware" + "-facts", "seed" + "-lessons", "toolchain" + "-practices",
           "anchors" + ".md", "anchors" + " §", "shared/" + "reference"]
try:
    files = subprocess.check_output(["git", "-C", root, "ls-files"],
                                    stderr=subprocess.DEVNULL).decode().split("\n")
except (subprocess.CalledProcessError, OSError):
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
        files += [os.path.relpath(os.path.join(d, n), root) for n in names]
files = [f for f in files if f and not f.startswith("docs/") and not f.startswith("emitted/")
         and os.path.isfile(os.path.join(root, f))]

headings = {}
def titles(doc):
    if doc not in headings:
        path = os.path.join(root, doc)
        headings[doc] = None
        if os.path.isfile(path):
            headings[doc] = {m.group(1).strip() for m in
                             re.finditer(r"^#+\s+(.+?)\s*$", open(path, encoding="utf-8").read(), re.M)}
    return headings[doc]

Q = r'\\?"([^"\\]+)\\?"'
chain = re.compile(r"(docs/[A-Za-z0-9_./-]+\.md)(?:,\s*" + Q + r"((?:\s*(?:,|and|, and)\s*" + Q + r")*))?")
fails = 0
for f in files:
    try:
        text = open(os.path.join(root, f), encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        continue
    for i, line in enumerate(text.split("\n"), 1):
        for name in outside:
            if name in line:
                print("FAIL: %s:%d cites %r, which is not part of the project" % (f, i, name))
                fails += 1
    # One logical text: adjacent C string literals joined, comment leaders
    # of continued lines dropped, so a title may wrap.
    flat = re.sub(r'"\s*\n\s*"', "", text)
    flat = re.sub(r"\s*\n\s*(?:\*(?!/)|//+|#+(?!\w))?\s*", " ", flat)
    for m in chain.finditer(flat):
        doc = m.group(1)
        t = titles(doc)
        if t is None:
            print("FAIL: %s cites %s, which does not exist" % (f, doc))
            fails += 1
            continue
        cited = [m.group(2)] if m.group(2) else []
        cited += re.findall(Q, m.group(3) or "")
        for c in cited:
            c = re.sub(r"\s+", " ", c)
            if c not in t:
                print("FAIL: %s cites %s, \"%s\": no such section" % (f, doc, c))
                fails += 1
for f in files:
    if (re.match(r"gen/.*\.c$", f) or re.match(r"runtime/[^/]*\.c$", f)) and \
            not open(os.path.join(root, f), encoding="utf-8").read().startswith("/*"):
        print("FAIL: %s does not open with a comment on its role" % f)
        fails += 1
abi = open(os.path.join(root, "docs/ABI.md"), encoding="utf-8").read()
for m in re.finditer(r"```\n(//@kgen-abi .*?//@end\n)```", abi, re.S):
    doc = m.group(1)
    kernel = re.search(r"^//@kernel (\S+)$", doc, re.M).group(1)
    target = re.search(r"^//@target (\S+)$", doc, re.M).group(1)
    path = os.path.join(root, "emitted", target, kernel + ".ptx")
    if not os.path.isfile(path):
        print("FAIL: docs/ABI.md shows the header of %s, which emitted/ does not hold" % kernel)
        fails += 1
        continue
    ptx = open(path, encoding="utf-8").read()
    real = ptx[:ptx.index("//@end\n") + 7]
    if real != doc:
        print("FAIL: docs/ABI.md's example header differs from emitted/%s/%s.ptx:" % (target, kernel))
        for a, b in zip(doc.splitlines(), real.splitlines() + [""] * 99):
            if a != b:
                print("  docs:    %s\n  emitted: %s" % (a, b))
        fails += 1
print("%d file(s) checked, %d failure(s)" % (len(files), fails))
sys.exit(1 if fails else 0)
PY
