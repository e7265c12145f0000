#!/bin/bash
# Usage: FAK=path/to/fak bench/http_overhead.sh   (port 18181; SmolLM2 Q8_0, 2 threads)
# HTTP-layer cost at concurrency 1: decode ms/token of fak generate vs fak serve
# on the same ~1.2k-token prompt (alternated, 3 rounds).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python3 -c "
words='alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega'.split()
import random; r=random.Random(7); print(' '.join(r.choice(words) for _ in range(1150)))" > ${TMPDIR:-/tmp}/fak-http-prompt.txt
B=${FAK:-target/release/fak}
M=models/smollm2-135m-instruct-q8_0.gguf
$B serve --model $M --threads 2 --port 18181 2>${TMPDIR:-/tmp}/fak-http-serve.log & SP=$!
for i in $(seq 60); do curl -sf localhost:18181/health >/dev/null && break; sleep 1; done
kill -STOP $SP
for round in 1 2 3; do
  a=$( { $B generate --model $M --prompt-file ${TMPDIR:-/tmp}/fak-http-prompt.txt -n 1 --ignore-eos --threads 2 >/dev/null; } 2>&1 | grep -o 'in [0-9.]* s' | grep -o '[0-9.]*')
  b=$( { $B generate --model $M --prompt-file ${TMPDIR:-/tmp}/fak-http-prompt.txt -n 129 --ignore-eos --threads 2 >/dev/null; } 2>&1 | grep -o 'in [0-9.]* s' | grep -o '[0-9.]*')
  kill -CONT $SP
  s=$(python3 - <<PY
import json,time,urllib.request
body=json.dumps({"prompt":open('${TMPDIR:-/tmp}/fak-http-prompt.txt').read().rstrip('\n'),"max_tokens":129,"temperature":0,"ignore_eos":True,"stream":True}).encode()
req=urllib.request.Request('http://127.0.0.1:18181/v1/completions',data=body,headers={'Content-Type':'application/json'})
ts=[]
with urllib.request.urlopen(req) as r:
    for line in r:
        if line.startswith(b'data: {'): ts.append(time.perf_counter())
d=[b-a for a,b in zip(ts,ts[1:])]
print(round(1000*sum(d)/len(d),3), len(ts))
PY
)
  kill -STOP $SP
  echo "round $round generate_ms_per_tok $(python3 -c "print(round(1000*($b-$a)/128,3))") serve_ms_per_chunk $s"
done
kill -CONT $SP; kill $SP
