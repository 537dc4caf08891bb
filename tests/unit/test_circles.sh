#!/usr/bin/env bash
# The files of gen/ and runtime/ form no circle: neither in the graph of
# #include "..." lines nor in the cross-file call graph, where file A points
# at file B when the code of A's object calls a function that B's object
# defines (nm and the call relocations of readelf -r over the objects listed
# in compile_commands.json). Taking a function's address is not a call:
# gen/target.c's table of each target's family ops, the emulator's opcode
# table (runtime/emu/optab.c) and its completion callbacks name functions
# that call back into the code that stores them, by design. A circle is
# reported with every file on it.
# Usage: tests/unit/test_circles.sh SOURCE_ROOT BUILD_DIR
set -u
exec python3 - "$1" "$2" <<'PY'
import json, os, re, subprocess, sys

src, build = (os.path.realpath(p) for p in sys.argv[1:3])
areas = ("gen/", "runtime/")

def rel(path):
    return os.path.relpath(os.path.realpath(path), src)

def mine(path):
    return path.startswith(areas)

def circles(graph):
    """Strongly connected components of more than one file, or a file on a self loop
    (Tarjan, iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = n[0]; n[0] += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]; n[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph.get(v, ()):
                    out.append(sorted(comp))
    return out

# Include graph over the sources and headers of the two areas.
inc = {}
for area in areas:
    for d, _, names in os.walk(os.path.join(src, area)):
        for nm in names:
            if not nm.endswith((".c", ".h")):
                continue
            f = rel(os.path.join(d, nm))
            for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', open(os.path.join(src, f)).read(), re.M):
                t = os.path.join(os.path.dirname(os.path.join(src, f)), m.group(1))
                if os.path.exists(t) and mine(rel(t)):
                    inc.setdefault(f, set()).add(rel(t))

# Call graph from the objects.
db = json.load(open(os.path.join(build, "compile_commands.json")))
defs, undefs = {}, {}
for e in db:
    f = rel(os.path.join(e["directory"], e["file"]))
    if not mine(f) or not f.endswith(".c"):
        continue
    obj = os.path.join(e["directory"], e["output"])
    out = subprocess.run(["nm", obj], capture_output=True, text=True)
    if out.returncode:
        print("FAIL: nm %s: %s" % (obj, out.stderr.strip()))
        sys.exit(1)
    und = set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            und.add(parts[1])
        elif len(parts) == 3 and parts[1] == "T":
            defs.setdefault(parts[2], set()).add(f)
    # Only calls from code count: the relocation of a call or jump
    # instruction (x86-64 PLT32, AArch64 CALL26/JUMP26).
    relocs = subprocess.run(["readelf", "-rW", obj], capture_output=True, text=True)
    if relocs.returncode:
        print("FAIL: readelf %s: %s" % (obj, relocs.stderr.strip()))
        sys.exit(1)
    code, used = False, set()
    for line in relocs.stdout.splitlines():
        m = re.match(r"Relocation section '([^']+)'", line)
        if m:
            code = m.group(1).startswith(".rela.text") or m.group(1).startswith(".rel.text")
            continue
        parts = line.split()
        if code and len(parts) >= 5 and parts[4] in und and re.search(r"PLT32|CALL26|JUMP26", parts[2]):
            used.add(parts[4])
    undefs[f] = used
calls = {}
for f, syms in undefs.items():
    for s in syms:
        for g in defs.get(s, ()):
            if g != f:
                calls.setdefault(f, set()).add(g)

if os.environ.get("CIRCLES_EDGES"):
    for f in sorted(calls):
        for g in sorted(calls[f]):
            print("edge", f, g, sorted(s for s in undefs[f] if g in defs.get(s, ())))
fails = 0
for kind, graph in (("include", inc), ("call", calls)):
    for c in circles(graph):
        print("FAIL: %s circle: %s" % (kind, " -> ".join(c)))
        fails += 1
print("%d files in the include graph, %d objects in the call graph, %d circle(s)"
      % (len(inc), len(undefs), fails))
sys.exit(1 if fails else 0)
PY
