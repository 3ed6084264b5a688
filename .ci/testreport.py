#!/usr/bin/env python3
"""Reads `go test -json` events (go help test, go doc test2json).

  testreport.py stream FILE   copy stdin's events to FILE and print, as
                              they end, each package's result and the
                              output of each failed test
  testreport.py slowest N FILE...
                              print the N slowest top-level tests
  testreport.py summary FILE...
                              print "tests: N passed, N failed, N skipped"
                              over the top-level tests, CI's closing line
"""
import json
import sys


def events(lines):
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            yield None, line
            continue
        if isinstance(ev, dict):
            yield ev, line
        else:
            yield None, line


def stream(path):
    out = {}  # (package, test or "") -> output lines
    with open(path, "w") as f:
        for ev, line in events(sys.stdin):
            f.write(line if line.endswith("\n") else line + "\n")
            if ev is None:
                sys.stdout.write(line)
                continue
            pkg, test, action = ev.get("Package", ""), ev.get("Test", ""), ev.get("Action")
            key = (pkg, test)
            if action == "build-output":
                # A package that does not compile (go help test: -json).
                sys.stdout.write(ev.get("Output", ""))
            elif action == "output":
                out.setdefault(key, []).append(ev.get("Output", ""))
            elif action in ("pass", "skip"):
                lines = out.pop(key, [])
                if not test:
                    sys.stdout.write("ok   %s %.1fs\n" % (pkg, ev.get("Elapsed", 0)))
            elif action == "fail":
                lines = out.pop(key, [])
                if test:
                    sys.stdout.write("".join(lines))
                else:
                    # The package's own output: a build failure, a panic or
                    # a timeout outside any test, then its FAIL line.
                    sys.stdout.write("".join(lines))
                    sys.stdout.write("FAIL %s %.1fs\n" % (pkg, ev.get("Elapsed", 0)))
            sys.stdout.flush()


def slowest(n, paths):
    times = []
    for path in paths:
        with open(path) as f:
            for ev, _ in events(f):
                if ev is None or ev.get("Action") not in ("pass", "fail"):
                    continue
                test = ev.get("Test", "")
                if not test or "/" in test:
                    continue
                times.append((ev.get("Elapsed", 0), test, ev.get("Package", ""), ev["Action"]))
    times.sort(reverse=True)
    print("slowest %d tests:" % n)
    for elapsed, test, pkg, action in times[:n]:
        print("%8.1fs  %s  %s%s" % (elapsed, test, pkg, "" if action == "pass" else "  (failed)"))


def summary(paths):
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for path in paths:
        with open(path) as f:
            for ev, _ in events(f):
                if ev is None or not ev.get("Test") or "/" in ev["Test"]:
                    continue
                if ev.get("Action") in counts:
                    counts[ev["Action"]] += 1
    print("tests: %d passed, %d failed, %d skipped" % (counts["pass"], counts["fail"], counts["skip"]))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "stream":
        stream(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "slowest":
        slowest(int(sys.argv[2]), sys.argv[3:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "summary":
        summary(sys.argv[2:])
    else:
        sys.exit(__doc__)
