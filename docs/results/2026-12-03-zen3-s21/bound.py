"""The fleet's time if every kernel ran at its best single-thread rate.

Reads the reports that run.sh writes beside this file (and the earlier run's
38c041b fleet reports), and prints, per shape, the sum over kernels of
work / (2 threads x best rate) next to half of 38c041b's wall and the
wall that 60% of the roofline allows. Usage: python3 bound.py DIR
"""

import glob
import json
import os
import re
import statistics
import sys

HEAD_DIM = 64  # SmolLM2's head width: scores = attention MACs / (2 * 64)


def rates(d):
    gemm = [float(m) for m in re.findall(r"packed\s+[\d.]+ ms \(([\d.]+) GMAC/s",
                                          open(os.path.join(d, "gemm_speed.txt")).read())]
    attn = open(os.path.join(d, "attn_mem.txt")).read()
    scores = [float(x) for x in re.findall(r"dims-major scores\s+([\d.]+)", attn)]
    values = [float(x) for x in re.findall(r"value sums\s+([\d.]+)", attn)]
    ops = open(os.path.join(d, "ops_speed.txt")).read()
    softmax_ns = float(re.search(r"softmax n=256\s+avx2\s+([\d.]+)", ops).group(1)) / 256
    return max(gemm), max(scores), max(values), softmax_ns


def work(report):
    run = json.load(open(report))["runs"][0]
    roof = run["roofline"]
    phases = [roof[k] for k in ("prefix", "result_ingest", "decode")]
    matmul = sum(p["matmul_macs"] for p in phases) / 1e9
    attention = sum(p["attention_macs"] for p in phases) / 1e9
    return run, matmul, attention, roof["total_s"]


def main(d):
    gemm, scores, values, softmax_ns = rates(d)
    print(f"best single-thread rates: gemm_q8 {gemm:.1f} GMAC/s, dims-major scores "
          f"{scores:.1f}, value sums {values:.1f}, softmax {softmax_ns:.2f} ns/score")
    s20 = os.path.join(d, "..", "2026-12-03-zen3-s20", "ab-38c041b")
    for shape, mine, old in (("probe", "probe.json", "probe-38c-*.json"),
                             ("bounded-long T40 A8", "bl.json", "bl-38c-*.json")):
        run, matmul, attention, roof_s = work(os.path.join(d, mine))
        turns = run["turns"] * run["agents"]
        t_mm = matmul / (2 * gemm)
        t_sc = attention / 2 / (2 * scores)
        t_va = attention / 2 / (2 * values)
        t_sm = attention / (2 * HEAD_DIM) * softmax_ns / 2
        bound = t_mm + t_sc + t_va + t_sm
        olds = [json.load(open(p))["runs"][0]["agent_turns_per_s"]
                for p in sorted(glob.glob(os.path.join(s20, old)))]
        base = statistics.median(olds)
        print(f"\n{shape}: {matmul:.1f} GMAC in products, {attention:.1f} GMAC in attention")
        print(f"  at the best rates: products {t_mm:.2f} s + scores {t_sc:.2f} s + values "
              f"{t_va:.2f} s + softmax {t_sm:.2f} s = {bound:.2f} s, "
              f"{turns / bound:.3f} agent-turns/s")
        print(f"  measured now: {run['agent_turns_per_s']:.3f} agent-turns/s ({run['wall_s']:.2f} s)")
        print(f"  38c041b (the earlier run, median of {len(olds)}): {base:.3f}; 2x = {2 * base:.3f} "
              f"agent-turns/s, a wall of {turns / (2 * base):.2f} s")
        print(f"  60% of the roofline ({roof_s:.2f} s) allows {roof_s / 0.6:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1])
