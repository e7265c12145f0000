# Shared helpers of bench/serve.sh and bench/fleet_http.sh (sourced; the
# caller defines log()): find or build the binaries and stop the server on
# exit, write the run's env.txt header, pick a port, wait for a server's
# /health, stop it.

# server_setup ROOT ENGINES: sets server_pid (the caller's running server:
# empty), traps cleanup on EXIT (and on INT / TERM, then exit 130), and sets
# fak and llama, the binaries of the engines named in the space-separated
# ENGINES ("fak", "llama-server"): FAK / LLAMA_SERVER, or built if unset
# (cargo under ROOT; bench/peers/build-server.sh). A binary whose engine is
# not named is FAK / LLAMA_SERVER, or empty.
server_setup() {
    local root=$1 engines=$2
    server_pid=
    trap cleanup EXIT
    trap 'cleanup; exit 130' INT TERM
    fak=${FAK:-}
    if [[ " $engines " == *" fak "* && -z "$fak" ]]; then
        cargo build --release -p fak-cli --manifest-path "$root/Cargo.toml" >&2
        fak="${CARGO_TARGET_DIR:-$root/target}/release/fak"
    fi
    llama=${LLAMA_SERVER:-}
    if [[ " $engines " == *" llama-server "* && -z "$llama" ]]; then
        llama=$("$root/bench/peers/build-server.sh")
    fi
}

# cleanup: stops the server in server_pid, if any, and empties it.
cleanup() {
    if [[ -n "$server_pid" ]]; then stop "$server_pid"; fi
    server_pid=
}

# model_id MODEL: the model's path and the first 16 hex digits of its sha256.
model_id() {
    echo "$1 ($(sha256sum "$1" | cut -c1-16)...)"
}

# env_report FILE FAK LLAMA LINE...: the run's header, into FILE and onto
# stderr: the LINEs (model, parameters), then each binary with its version
# (FAK = a fak binary, LLAMA = a llama-server binary; an empty one is left
# out), the CPU and the start time (UTC).
env_report() {
    local file=$1 fak=$2 llama=$3 v
    shift 3
    {
        printf '%s\n' "$@"
        if [[ -n "$fak" ]]; then echo "fak: $fak ($("$fak" --version 2>/dev/null || echo '?'))"; fi
        if [[ -n "$llama" ]]; then
            v=$("$llama" --version 2>&1 || true)
            echo "llama-server: $llama (${v%%$'\n'*})"
        fi
        echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')  nproc: $(nproc)"
        date -u +"started: %Y-%m-%dT%H:%M:%SZ"
    } | tee "$file" >&2
}

# free_port: an unused TCP port on 127.0.0.1.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_health URL PID: until GET URL/health is 200 (up to 300 s), failing
# early if PID exits.
wait_health() {
    local url=$1 pid=$2 i
    for ((i = 0; i < 1500; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "server (pid $pid) exited before becoming healthy"
            return 1
        fi
        if [[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health" || true)" == 200 ]]; then
            return 0
        fi
        sleep 0.2
    done
    log "server at $url not healthy after 300 s"
    return 1
}

# stop PID: SIGTERM, then SIGKILL after 30 s.
stop() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 150; i++)); do
        kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
        sleep 0.2
    done
    log "pid $pid still running 30 s after SIGTERM: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
