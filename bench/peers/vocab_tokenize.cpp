// llama.cpp's tokenizer on a vocab-only GGUF, for gen_vocab_golden.py.
//
// Links against the static libllama/ggml that bench/peers/build-server.sh
// builds from the llama-cpp-python 0.3.30 sdist, so the ids come from the
// same llama.cpp as the Python peer (which this is a stand-in for where
// llama-cpp-python is not importable).
//
//   vocab_tokenize VOCAB.gguf CASES OUT
//
// CASES: texts, each as a u32 little-endian byte length then the bytes.
// OUT:   per text, three lines: the ids of llama_tokenize(add_special=true,
//        parse_special=true), of (add_special=true, parse_special=false),
//        and the hex of llama_detokenize(first ids, remove_special=false,
//        unparse_special=true).
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

static void quiet(ggml_log_level, const char *, void *) {}

static std::vector<llama_token> tok(const llama_vocab * v, const std::string & s, bool parse) {
    std::vector<llama_token> out(s.size() + 16);
    int n = llama_tokenize(v, s.data(), (int32_t) s.size(), out.data(), (int32_t) out.size(), true, parse);
    if (n < 0) {
        out.resize(-n);
        n = llama_tokenize(v, s.data(), (int32_t) s.size(), out.data(), (int32_t) out.size(), true, parse);
    }
    out.resize(n < 0 ? 0 : n);
    return out;
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s VOCAB.gguf CASES OUT\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab * v = llama_model_get_vocab(model);
    std::ifstream in(argv[2], std::ios::binary);
    std::ofstream out(argv[3]);
    for (;;) {
        uint8_t lb[4];
        if (!in.read((char *) lb, 4)) {
            break;
        }
        const uint32_t len = lb[0] | (lb[1] << 8) | (lb[2] << 16) | ((uint32_t) lb[3] << 24);
        std::string s(len, '\0');
        if (len && !in.read(&s[0], len)) {
            fprintf(stderr, "truncated cases file\n");
            return 1;
        }
        const auto a = tok(v, s, true);
        const auto b = tok(v, s, false);
        for (const auto * ids : {&a, &b}) {
            for (size_t i = 0; i < ids->size(); ++i) {
                out << (i ? " " : "") << (*ids)[i];
            }
            out << "\n";
        }
        std::vector<char> buf(64 + 64 * a.size());
        int n = llama_detokenize(v, a.data(), (int32_t) a.size(), buf.data(), (int32_t) buf.size(), false, true);
        static const char * hex = "0123456789abcdef";
        for (int i = 0; i < n; ++i) {
            const uint8_t c = (uint8_t) buf[i];
            out << hex[c >> 4] << hex[c & 15];
        }
        out << "\n";
    }
    llama_model_free(model);
    return 0;
}
