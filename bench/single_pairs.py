#!/usr/bin/env python3
"""Paired single-stream comparison of fak, llama.cpp and ik_llama.cpp on one
model.

    bench/single_pairs.py MODEL --threads T --pairs N [--out DIR] [--ik-bench PATH]

Runs `fak bench model --reps 1 --json` and `llama-bench -p 256 -n 32 -r 1
-o json` alternately, N times each (fak first in every round), and prints
each round's decode and prefill-256 ratios and their medians. Pairing keeps
the ratio meaningful on a machine whose speed drifts (shared VMs): each
ratio compares runs seconds apart. Every run's JSON and a summary
(`pairs-t{T}.json`) are written to DIR (default $FAK_BENCH_OUT or
/tmp/fak-bench). The llama.cpp binary is
bench/.venv/llama.cpp-build/bin/llama-bench (bench/peers/build-server.sh
builds it) or $LLAMA_BENCH.

With ik_llama.cpp's llama-bench (`--ik-bench`, $IK_LLAMA_BENCH, or
bench/.venv/ik_llama-build/bin/llama-bench when bench/peers/build-ik-llama.sh
built it), each round also runs it twice, as it comes and with run-time
repacking (`-rtr 1`), and compares fak with the faster of the two per
metric ("ik best") and with the faster of all peers ("best peer").
`--no-ik` leaves it out, for a file whose types ik_llama.cpp does not
read (TQ1_0, TQ2_0, NVFP4): llama.cpp is then the best peer, and the
summary records `"ik_bench": null`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_fak(fak, model, threads):
    out = subprocess.run(
        [fak, "bench", "model", "-m", model, "-t", str(threads), "--reps", "1", "--json"],
        capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    return d, d["decode"]["tok_s"], d["prefill"][-1]["tok_s"]


def run_llama(lb, model, threads, extra=()):
    out = subprocess.run(
        [lb, "-m", model, "-t", str(threads), "-p", "256", "-n", "32", "-r", "1", "-o", "json", *extra],
        capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    pp = next(r["avg_ts"] for r in d if r["n_prompt"] == 256 and r["n_gen"] == 0)
    tg = next(r["avg_ts"] for r in d if r["n_gen"] == 32 and r["n_prompt"] == 0)
    return d, tg, pp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--fak", default=str(ROOT / "target/release/fak"))
    ap.add_argument("--llama-bench", default=os.environ.get(
        "LLAMA_BENCH", str(ROOT / "bench/.venv/llama.cpp-build/bin/llama-bench")))
    ap.add_argument("--out", default=os.environ.get("FAK_BENCH_OUT", "/tmp/fak-bench"))
    ik_default = os.environ.get("IK_LLAMA_BENCH", str(ROOT / "bench/.venv/ik_llama-build/bin/llama-bench"))
    ap.add_argument("--ik-bench", default=None,
                    help=f"ik_llama.cpp's llama-bench (default: {ik_default} when it exists)")
    ap.add_argument("--no-ik", action="store_true",
                    help="leave ik_llama.cpp out (a file with a type it does not read)")
    a = ap.parse_args()
    if a.no_ik:
        a.ik_bench = None
    elif a.ik_bench is None and Path(ik_default).exists():
        a.ik_bench = ik_default
    how = {a.fak: "cargo build --release", a.llama_bench: "bench/peers/build-server.sh"}
    if a.ik_bench:
        how[a.ik_bench] = "bench/peers/build-ik-llama.sh"
    for exe, build in how.items():
        if not Path(exe).exists():
            sys.exit(f"single_pairs: {exe} is missing (build it with {build})")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    pairs = []
    for i in range(a.pairs):
        fd, fdec, fpp = run_fak(a.fak, a.model, a.threads)
        ld, ldec, lpp = run_llama(a.llama_bench, a.model, a.threads)
        (out / f"pair{i}-fak-t{a.threads}.json").write_text(json.dumps(fd, indent=1))
        (out / f"pair{i}-llamacpp-t{a.threads}.json").write_text(json.dumps(ld, indent=1))
        p = {"fak_decode_tok_s": fdec, "llamacpp_decode_tok_s": ldec,
             "fak_prefill256_tok_s": fpp, "llamacpp_prefill256_tok_s": lpp,
             "decode_ratio": fdec / ldec, "prefill_ratio": fpp / lpp}
        line = (f"pair {i}: decode fak {fdec:.2f} llama.cpp {ldec:.2f} tok/s (x{p['decode_ratio']:.2f}) | "
                f"prefill 256 fak {fpp:.1f} llama.cpp {lpp:.1f} tok/s (x{p['prefill_ratio']:.2f})")
        if a.ik_bench:
            for tag, extra in (("ik", ()), ("ik_rtr", ("-rtr", "1"))):
                kd, kdec, kpp = run_llama(a.ik_bench, a.model, a.threads, extra)
                (out / f"pair{i}-{tag}-t{a.threads}.json").write_text(json.dumps(kd, indent=1))
                p[f"{tag}_decode_tok_s"], p[f"{tag}_prefill256_tok_s"] = kdec, kpp
            ikdec = max(p["ik_decode_tok_s"], p["ik_rtr_decode_tok_s"])
            ikpp = max(p["ik_prefill256_tok_s"], p["ik_rtr_prefill256_tok_s"])
            p.update({"decode_ratio_vs_ik_best": fdec / ikdec, "prefill_ratio_vs_ik_best": fpp / ikpp,
                      "decode_ratio_vs_best_peer": fdec / max(ikdec, ldec),
                      "prefill_ratio_vs_best_peer": fpp / max(ikpp, lpp)})
            line += (f" | ik best decode {ikdec:.2f} (x{p['decode_ratio_vs_ik_best']:.2f}) "
                     f"prefill {ikpp:.1f} (x{p['prefill_ratio_vs_ik_best']:.2f})")
        pairs.append(p)
        print(line, flush=True)
    med = lambda k: statistics.median(p[k] for p in pairs)
    summary = {"schema": "fak-single-pairs/1", "model": Path(a.model).name, "threads": a.threads,
               "pairs": pairs, "median": {k: med(k) for k in pairs[0]}, "cpu": fd.get("cpu"), "isa": fd.get("isa"),
               "ik_bench": a.ik_bench}
    (out / f"pairs-t{a.threads}.json").write_text(json.dumps(summary, indent=1))
    m = summary["median"]
    print(f"medians ({a.pairs} pairs, {a.threads} threads): decode fak {m['fak_decode_tok_s']:.2f} vs "
          f"llama.cpp {m['llamacpp_decode_tok_s']:.2f} tok/s, pairwise x{m['decode_ratio']:.2f}; "
          f"prefill 256 fak {m['fak_prefill256_tok_s']:.1f} vs {m['llamacpp_prefill256_tok_s']:.1f}, "
          f"pairwise x{m['prefill_ratio']:.2f}")
    if a.ik_bench:
        print(f"  ik_llama.cpp best of plain and -rtr 1: decode {max(m['ik_decode_tok_s'], m['ik_rtr_decode_tok_s']):.2f} "
              f"tok/s, fak pairwise x{m['decode_ratio_vs_ik_best']:.2f}; prefill 256 "
              f"{max(m['ik_prefill256_tok_s'], m['ik_rtr_prefill256_tok_s']):.1f}, fak pairwise "
              f"x{m['prefill_ratio_vs_ik_best']:.2f}; against the best peer: decode "
              f"x{m['decode_ratio_vs_best_peer']:.2f}, prefill x{m['prefill_ratio_vs_best_peer']:.2f}")


if __name__ == "__main__":
    main()
