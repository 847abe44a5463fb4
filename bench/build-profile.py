#!/usr/bin/env python3
"""Where a build's time and memory go: runs a command and samples every process under it
(rustc per crate, ptxas, opt, llc, build scripts, buck2's actions, test binaries) every
0.2 s, then prints the most expensive steps with their wall time, CPU time and peak
resident memory.

    bench/build-profile.py [--top N] [--json FILE] -- CMD ARGS...

A step is one process, named by its program and the argument that says what it works on
(the crate for rustc, the input file for LLVM tools and ptxas). CPU time and peak memory
are read from /proc, so a step shorter than the sampling period may be missed or
undercounted; the command's own exit status is returned. buck2's actions are children
of its daemon, not of the client: pass --buck2 to sample the daemon's tree too.
"""

import argparse
import json
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def children_map():
    kids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(pid))
    return kids


def tree(roots, kids):
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(kids.get(p, []))
    return seen


def expand(argv, cwd):
    """`argv` with each `@file` argument (buck2 passes rustc's arguments so) read in."""
    out = []
    for a in argv:
        if a.startswith("@"):
            try:
                with open(os.path.join(cwd, a[1:])) as f:
                    out.extend(line.strip().strip('"') for line in f if line.strip())
                continue
            except OSError:
                pass
        out.append(a)
    return out


def label(argv):
    prog = os.path.basename(argv[0]) if argv else "?"
    if prog in ("rustc", "clippy-driver") or prog.endswith("rustc"):
        names = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--crate-name"]
        names += [a.split("=", 1)[1] for a in argv if a.startswith("--crate-name=")]
        if names:
            test = " (test)" if "--test" in argv else ""
            return f"rustc {names[0]}{test}"
    if prog in ("ptxas", "opt", "llc", "llvm-link"):
        inputs = [a for a in argv[1:] if not a.startswith("-") and ("." in a)]
        return f"{prog} {os.path.basename(inputs[0]) if inputs else ''}".strip()
    if prog.startswith("build-script-") or prog == "build_script_build":
        return f"build script {os.path.basename(os.path.dirname(argv[0]))}"
    words = [os.path.basename(a) for a in argv[:3]]
    return " ".join(words)[:80]


def sample(pids, steps, now):
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2 :].split()
            key = (pid, fields[19])  # pid and start time: one process
            if key not in steps:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
                argv = expand(argv, os.readlink(f"/proc/{pid}/cwd"))
                steps[key] = {"label": label(argv), "first": now, "cpu": 0.0, "rss": 0}
        except OSError:
            continue
        s = steps[key]
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        rss = int(fields[21]) * PAGE
        s["last"], s["cpu"], s["rss"] = now, max(s["cpu"], cpu), max(s["rss"], rss)


def daemon_pids():
    out = subprocess.run(["pgrep", "-f", "buck2d"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--buck2", action="store_true")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    start = time.time()
    child = subprocess.Popen(cmd)
    steps = {}
    while child.poll() is None:
        roots = [child.pid] + (daemon_pids() if a.buck2 else [])
        sample(tree(roots, children_map()), steps, time.time() - start)
        time.sleep(0.2)
    wall = time.time() - start
    # Processes that ran the same program on the same input add up (e.g. rustc runs).
    merged = {}
    for s in steps.values():
        m = merged.setdefault(s["label"], {"label": s["label"], "wall": 0.0, "cpu": 0.0, "rss": 0})
        m["wall"] += s["last"] - s["first"]
        m["cpu"] += s["cpu"]
        m["rss"] = max(m["rss"], s["rss"])
    # Each process's own CPU time (children excluded), so wrappers such as cargo count
    # only their own work.
    ranked = sorted(merged.values(), key=lambda m: m["cpu"], reverse=True)
    peak = max((m["rss"] for m in merged.values()), default=0)
    print(f"\nbuild-profile: {' '.join(cmd)}: exit {child.returncode}, {wall:.0f} s wall, "
          f"peak step {peak / 2**30:.2f} GiB", file=sys.stderr)
    print(f"{'step':60} {'wall s':>8} {'cpu s':>8} {'peak GiB':>9}", file=sys.stderr)
    for m in ranked[: a.top]:
        print(f"{m['label'][:60]:60} {m['wall']:8.1f} {m['cpu']:8.1f} {m['rss'] / 2**30:9.2f}",
              file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"command": cmd, "exit": child.returncode, "wall_s": wall, "steps": ranked}, f, indent=1)
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
