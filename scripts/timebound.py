#!/usr/bin/env python3
"""What a capture's host times cost at the least, coded without loss (docs/BENCH.md, "How few
bytes the times can take"): the timed records a RUN holds (launches and library calls, each
thread's in order) give a gap to the record before; a library call also has its time inside
(`call_ns`). A decode loop repeats its steps, so each gap and each time inside is predicted from
the same position in the steps before (when those steps have as many timed records), and what is
left is the residual. Its cost is estimated per position, as a coder with one adaptive model per
position would pay it: the entropy of the residual's bit length plus its sign and mantissa bits
(an Elias-gamma-like code whose bucket is modelled: within a bucket the bits are close to uniform
for this noise). Three predictors: the step before's value (what format v4+ writes), the median
of the three steps before, the least of the four. Steps whose shape differs from the four before
are counted at the gap's own cost against 0 (rare in a steady loop).

Reads `tokprof dump --raw`, so any capture version works. A one-off tool, not a test.

usage: timebound.py TOKPROF CAPTURE...   (prints one table row per capture)"""
import collections, json, math, os, subprocess, sys

PREDICTORS = {
    "step before": lambda h, p: h[-1][p],
    "median of 3": lambda h, p: sorted(x[p] for x in h[-3:])[1],
    "least of 4": lambda h, p: min(x[p] for x in h[-4:]),
}


def cost_bits(by_pos):
    """Total bits: per position, H(bit length) + sign + mantissa bits of each residual."""
    bits = 0.0
    for res in by_pos.values():
        n = len(res)
        lens = collections.Counter(abs(r).bit_length() for r in res)
        bits -= sum(c * math.log2(c / n) for c in lens.values())
        bits += sum(max(abs(r).bit_length() - 1, 0) + (1 if r else 0) for r in res)
    return bits


def series(tokprof, cap):
    """Per (thread, step): the gaps between its timed records and its library calls' call_ns."""
    steps = collections.OrderedDict()
    last, launches = {}, 0
    out = subprocess.run([tokprof, "dump", "--raw", cap], check=True, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        r = json.loads(line)
        if r.get("type") not in ("launch", "lib_call"):
            continue
        launches += r["type"] == "launch"
        key = (r["tid"], r["step"])
        s = steps.setdefault(key, ([], []))
        prev = last.get(r["tid"])
        if prev is not None:
            s[0].append(r["host_ns"] - prev)
        last[r["tid"]] = r["host_ns"]
        if r["type"] == "lib_call":
            s[1].append(r["call_ns"])
    return steps, launches


def order0_bits(res):
    """The residuals' empirical entropy, one model for all positions (what zstd's literal
    coding approaches), total bits."""
    n = len(res)
    return -sum(c * math.log2(c / n) for c in collections.Counter(res).values())


def bound(steps, col, pred):
    hist = collections.defaultdict(list)  # thread -> the steps before (this column's lists)
    by_pos = collections.defaultdict(list)
    for (tid, _), s in steps.items():
        v, h = s[col], hist[tid]
        same = len(h) >= 4 and all(len(x) == len(v) for x in h[-4:])
        for p, x in enumerate(v):
            by_pos[(tid, len(v), p) if same else ("cold",)].append(x - pred(h, p) if same else x)
        h.append(v)
        del h[:-4]
    flat = [r for res in by_pos.values() for r in res]
    return min(cost_bits(by_pos), order0_bits(flat)) / 8


def main(tokprof, cap):
    steps, launches = series(tokprof, cap)
    size = os.path.getsize(cap)
    row = [os.path.basename(cap), str(launches), f"{size / launches:.2f}"]
    for name, pred in PREDICTORS.items():
        b = bound(steps, 0, pred) + bound(steps, 1, pred)
        row.append(f"{b / launches:.2f}")
    print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    print("| capture | launches | file, B/launch | times at least, B/launch: "
          + " | ".join(PREDICTORS) + " |\n|---|---|---|" + "---|" * len(PREDICTORS))
    for c in sys.argv[2:]:
        main(sys.argv[1], c)
