"""The sequential accuracy guard's error rates and items evaluated, measured by
simulation on the default suite's stored per-item reference scores (docs/STATISTICS.md
quotes the tables). Each part prints markdown rows:

    python -m patchgate.tools.sequential_rates main 200        # the main table, ~1 min
    python -m patchgate.tools.sequential_rates gate 200        # the gate's looks, ~30 s
    python -m patchgate.tools.sequential_rates skip 200        # looks skipped, ~3 min
    python -m patchgate.tools.sequential_rates edge 500        # near the limit, ~5 min
    python -m patchgate.tools.sequential_rates unequal 200     # unequal task sizes
    python -m patchgate.tools.sequential_rates long 200        # 6,000 items
    python -m patchgate.tools.sequential_rates long-edge 2000 0
    python -m patchgate.tools.sequential_rates delta 200       # the level, a profile key
    python -m patchgate.tools.sequential_rates union 40        # one CS per task, combined

Measures only: nothing is written.
"""
# ruff: noqa: E501, E701, E702, E741, B905

import json
import sys
import time
import types

from ..profile import repo_root
from ..stats import rate, sequential, sequential_sim, strata

S = types.SimpleNamespace(**{k: v for m in (strata, sequential, sequential_sim)
                             for k, v in vars(m).items() if not k.startswith("__")})
tasks = json.loads((repo_root() / "baselines/default/reference.json").read_text()
                   )["accuracy"]["tasks"]
suite = [[s["score"] for s in t["samples"]] for t in tasks.values()]  # 6 x 100, 577 right
part, orders = (sys.argv[1], int(sys.argv[2])) if len(sys.argv) > 2 else ("main", 200)

def changes(ref, cand, w, d):  # fewest single flips of the candidate that reverse the verdict
    pool = sorted((W / len(cc) for W, cc in zip(w, cand) for c in cc if (c == 1) == (d >= 0)),
                  reverse=True)
    k, moved = 0, 0.0
    while (d - moved >= 0) if d >= 0 else (d + moved < 0):
        moved, k = moved + pool[k], k + 1
    return k

def row(label, ref, cand, weights=None, block=16, growth=1.0):
    t0, st = time.time(), S.SequentialSettings(block=block, growth=growth)
    r = S.disagreement(ref, cand, weights, orders=orders, seed=2026, settings=st)
    w = weights or S.task_mean_weights([len(x) for x in ref])
    d = sum(W * sum(c - 0.99 * s for s, c in zip(rr, cc)) / len(rr)
            for W, rr, cc in zip(w, ref, cand))
    print(f"| {label} | {r.ratio:.4f} | {sum(map(len, ref)) * d:+.2f} | {r.full_decision} |"
          f" {r.wrong.k}/{r.orders} (<= {100 * r.wrong.high:.1f} %) | {r.mean_fraction:.3f} |"
          f" {r.max_fraction:.3f} | {r.passed}/{r.rejected}/{r.to_end} |"
          f" {S.least_fraction(changes(ref, cand, w, d)):.2f} | {time.time() - t0:.0f} s |",
          flush=True)

def many(label, ref, x, noise=0, block=16, patterns=range(10)):  # where errors can happen
    k = n = 0
    for flips in patterns:
        r = S.disagreement(ref, S.flipped_to_ratio(ref, x, seed=flips, noise=noise), None,
                           orders, flips, S.SequentialSettings(block=block, growth=1.0))
        k, n = k + r.wrong.k, n + r.orders
    c = rate(k, n)
    print(f"| {label} | {r.ratio:.4f} | {r.full_decision} | {k}/{n} ({100 * c.rate:.2f} %,"
          f" <= {100 * c.high:.2f} %) |", flush=True)

if part == "main":  # the default suite; equal task sizes, so both weightings agree
    for block in (16, 32):
        for noise in (0, 7):
            for x in (0.80, 0.97, 0.985, 0.99, 0.995, 1.00, 1.01):
                row(f"{x:.3f} {'noisy' if noise else 'clean'} B={block}", suite,
                    S.flipped_to_ratio(suite, x, seed=1, noise=noise), block=block)
elif part == "gate":  # the gate's looks on the default suite: 96 (a batch of 16 a task), x1.25
    for noise in (0, 7):
        for x in (0.80, 0.97, 0.985, 0.99, 0.995, 1.00, 1.01):
            row(f"{x:.3f} {'noisy' if noise else 'clean'} gate", suite,
                S.flipped_to_ratio(suite, x, seed=1, noise=noise), block=96, growth=1.25)
elif part == "skip":  # the gate's looks, every one or skipping those that cannot decide
    for noise in (0, 7):
        for x in (0.80, 0.97, 0.985, 0.99, 0.995, 1.00, 1.01):
            cand, cells = S.flipped_to_ratio(suite, x, seed=1, noise=noise), []
            for margin in (0.0, 0.25, 0.5):
                r = S.disagreement(suite, cand, None, orders, 2026, S.SequentialSettings(
                    block=96, growth=1.25, skip_margin=margin))
                cells.append(f"{r.wrong.k}/{r.orders}, {r.mean_fraction:.3f}, "
                             f"{r.mean_looks:.2f}")
            print(f"| {x:.3f} {'noisy' if noise else 'clean'} | {' | '.join(cells)} |",
                  flush=True)
elif part == "edge":  # near the limit, 10 flip patterns x `orders` orders
    for x in (0.985, 0.99, 0.995):
        for noise in (0, 7):
            many(f"{x:.3f} {'noisy' if noise else 'clean'}", suite, x, noise)
elif part == "unequal":  # tasks cut to unequal sizes: the two weightings differ
    ref = [x[:n] for x, n in zip(suite, (100, 60, 100, 40, 100, 30))]
    sizes = [len(x) for x in ref]
    for name, w in (("pooled", S.pooled_weights(sizes)), ("per task", None)):
        for x in (0.80, 0.97, 1.00, 1.01):
            row(f"{x:.3f} {name}", ref, S.flipped_to_ratio(ref, x, seed=1, task_weights=w), w)
elif part == "long":  # a longer evaluation: the suite ten times over (6 x 1000 items)
    ref = [x * 10 for x in suite]
    for x in (0.97, 0.985, 0.99, 1.00, 1.01):
        row(f"{x:.3f} clean N=6000 B=32", ref, S.flipped_to_ratio(ref, x, seed=1), block=32)
elif part == "long-edge":
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 0  # flip patterns first..first+4
    many(f"0.990 clean N=6000 B=32, patterns {first}-{first + 4}", [x * 10 for x in suite],
         0.99, block=32, patterns=range(first, first + 5))
elif part == "delta":  # the level is a profile key: what a looser one buys
    for delta in (0.01, 0.05, 0.10):
        for x in (0.97, 1.00, 1.01):
            r = S.disagreement(suite, S.flipped_to_ratio(suite, x, seed=1), None, orders, 2026,
                               S.SequentialSettings(delta=delta, growth=1.0))
            print(f"| {delta:.2f} | {x:.3f} | {r.wrong.k}/{r.orders} | {r.mean_fraction:.3f} |"
                  f" {S.least_fraction(12 if x != 1.0 else 6, delta):.2f} |", flush=True)
elif part == "union":  # the simplest valid route: one CS per task at delta / T, combined
    sizes, T = [len(x) for x in suite], len(suite)
    for x in (0.80, 0.97, 1.00, 1.01):
        cand, shares, wrong = S.flipped_to_ratio(suite, x, seed=1), [], 0
        for seed in range(orders):
            guards = [S.SequentialGuard([n], None, S.SequentialSettings(delta=0.01 / T, growth=1.0))
                      for n in sizes]
            order, decision = S.stratified_order(sizes, seed), None
            for start in range(0, 600, 16):
                for t, i in order[start:start + 16]:
                    guards[t].decision = S.CONTINUE  # one task's own verdict does not stop it
                    guards[t].add([suite[t][i]], [cand[t][i]])
                res = [g.result() for g in guards]
                lo = sum(r.low for r in res) / T
                hi = sum(r.high for r in res) / T
                if start + 16 >= 600 or lo >= 0 or hi < 0:
                    decision = (S.full_set_decision(suite, cand) if start + 16 >= 600
                                else S.PASS if lo >= 0 else S.REJECT)
                    break
            wrong += decision != S.full_set_decision(suite, cand)
            shares.append(min(start + 16, 600) / 600)
        print(f"| {x:.3f} | {S.full_set_decision(suite, cand)} | {wrong}/{orders} |"
              f" {sum(shares) / orders:.3f} |", flush=True)
