"""fak old vs new, alternated in pairs: `fak bench model --reps 1 --json` (single_pairs.py's fak command)."""
import json, statistics, subprocess, sys
model, out = sys.argv[1], sys.argv[2]
bins = {"old": "$TMPDIR/fak-old", "new": "$TMPDIR/fak-new"}
pairs = []
for i in range(3):
    p = {}
    for name, b in bins.items():
        r = subprocess.run([b, "bench", "model", "-m", model, "-t", "2", "--reps", "1", "--json"],
                           check=True, capture_output=True, text=True)
        d = json.loads(r.stdout)
        open(f"{out}/pair{i}-{name}.json", "w").write(r.stdout)
        p[f"{name}_decode"] = d["decode"]["tok_s"]
        p[f"{name}_prefill256"] = d["prefill"][-1]["tok_s"]
    p["decode_ratio"] = p["new_decode"] / p["old_decode"]
    p["prefill_ratio"] = p["new_prefill256"] / p["old_prefill256"]
    print(f"pair {i}: decode old {p['old_decode']:.1f} new {p['new_decode']:.1f} (x{p['decode_ratio']:.2f}) | "
          f"prefill 256 old {p['old_prefill256']:.1f} new {p['new_prefill256']:.1f} (x{p['prefill_ratio']:.2f})", flush=True)
    pairs.append(p)
med = {k: statistics.median(p[k] for p in pairs) for k in pairs[0]}
json.dump({"model": model, "pairs": pairs, "median": med}, open(f"{out}/oldnew.json", "w"), indent=1)
print("medians:", {k: round(v, 2) for k, v in med.items()})
