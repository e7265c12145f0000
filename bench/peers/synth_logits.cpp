// Teacher-forced llama.cpp logits on one model, for synth_golden.py.
//
// Links against the static libllama/ggml that bench/peers/build-server.sh
// builds from the llama-cpp-python 0.3.30 sdist, so the logits come from the
// same llama.cpp as the Python peer (this is its stand-in where
// llama-cpp-python is not importable). It makes the same calls as
// synth_golden.py's Python path: context n_ctx 2048, n_batch 2048, one
// sequence, 2 threads, library defaults otherwise (f16 K/V, flash attention
// "auto").
//
//   synth_logits MODEL.gguf IDS N_PROMPT OUT [FLASH_ATTN]
//
// FLASH_ATTN: auto (default, the goldens), on or off; llama.cpp's own
// spread between these settings is the scale of legitimate differences.
// IDS: token ids, u32 little-endian. The first N_PROMPT are decoded as one
// batch (logits of the last), then each later id alone.
// OUT: n_vocab f32 little-endian per row, 1 + (n_ids - N_PROMPT) rows.
#include "llama.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

static void quiet(ggml_log_level, const char *, void *) {}

int main(int argc, char ** argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s MODEL.gguf IDS N_PROMPT OUT [auto|on|off]\n", argv[0]);
        return 2;
    }
    const std::string fa = argc == 6 ? argv[5] : "auto";
    if (fa != "auto" && fa != "on" && fa != "off") {
        fprintf(stderr, "bad FLASH_ATTN %s\n", fa.c_str());
        return 2;
    }
    std::ifstream in(argv[2], std::ios::binary);
    std::vector<llama_token> ids;
    uint32_t x;
    while (in.read(reinterpret_cast<char *>(&x), 4)) {
        ids.push_back((llama_token) x);
    }
    const int n_prompt = atoi(argv[3]);
    if (n_prompt <= 0 || n_prompt > (int) ids.size() || ids.size() > 2048) {
        fprintf(stderr, "bad N_PROMPT %d for %zu ids\n", n_prompt, ids.size());
        return 2;
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = 2048;
    cp.n_seq_max = 1;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.flash_attn_type = fa == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                       : fa == "off" ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                     : LLAMA_FLASH_ATTN_TYPE_AUTO;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_init_from_model failed\n");
        return 1;
    }
    llama_batch batch = llama_batch_init(n_prompt, 0, 1);
    std::ofstream out(argv[4], std::ios::binary);
    auto decode = [&](int start, int n) -> bool {
        batch.n_tokens = n;
        for (int i = 0; i < n; i++) {
            batch.token[i] = ids[start + i];
            batch.pos[i] = start + i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = i == n - 1;
        }
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "llama_decode failed at %d\n", start);
            return false;
        }
        const float * l = llama_get_logits_ith(ctx, -1);
        for (int v = 0; v < n_vocab; v++) {
            if (!std::isfinite(l[v])) {
                fprintf(stderr, "non-finite logit at %d\n", start);
                return false;
            }
        }
        out.write(reinterpret_cast<const char *>(l), sizeof(float) * n_vocab);
        return true;
    };
    bool ok = decode(0, n_prompt);
    for (int i = n_prompt; ok && i < (int) ids.size(); i++) {
        ok = decode(i, 1);
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    printf("%d\n", n_vocab);
    return ok ? 0 : 1;
}
