// fak's CUDA kernels. Compiled at run time by NVRTC for the device's own
// architecture (see device.rs); no headers, so NVRTC needs no include path.
//
// Rounding: every float operation whose result must match a CPU scalar twin
// bit for bit is written with an explicit round-to-nearest intrinsic
// (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn, __dmul_rn, ...), which the
// compiler never contracts into an FMA. Those kernels (quantizers, RMSNorm,
// RoPE, SwiGLU, softmax, the f16/bf16 conversions) give the CPU twin's exact
// bits. The dot products sum their exact per-block integer products in a
// different order than the CPU, so they agree to a stated bound instead.
//
// Batch invariance: every kernel computes a token's result from that token's
// own inputs with a loop order fixed by the tensor shapes, never by how many
// tokens the launch holds or where in the launch the token sits.

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define FULL_MASK 0xffffffffu
// Tokens one warp takes through a weight row at once (matmul kernels).
#define TOK_TILE 8

__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ float bf16_to_f32(u16 h) {
    return __uint_as_float(((u32)h) << 16);
}

__device__ __forceinline__ u16 f32_to_bf16(float f) {
    u16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Butterfly sums and maxima: every lane ends with the same value, and the
// order of the additions depends only on the lane layout.
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

__device__ __forceinline__ int warp_isum(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// Block-wide reductions over blockDim.x (a multiple of 32, at most 1024)
// threads; `red` is 32 floats of shared memory. Fixed tree: warp butterflies,
// then warp 0 over the warps' results.
__device__ float block_sum(float v, float* red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < nw ? red[lane] : 0.0f;
        w = warp_sum(w);
        if (lane == 0) red[0] = w;
    }
    __syncthreads();
    float r = red[0];
    __syncthreads();
    return r;
}

__device__ float block_max(float v, float* red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < nw ? red[lane] : -__int_as_float(0x7f800000);
        w = warp_max(w);
        if (lane == 0) red[0] = w;
    }
    __syncthreads();
    float r = red[0];
    __syncthreads();
    return r;
}

// ---------------------------------------------------------------- expf
// The CPU's expf (fak_kernels::expf): 32-entry table + degree-3
// polynomial in f64, step for step.
__constant__ u64 EXP_TAB[32] = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull,
    0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull,
    0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull,
    0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull,
    0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull,
    0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull,
    0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};

__device__ float fak_expf(float x) {
    if (x != x) return __fadd_rn(x, x);
    if (x > __uint_as_float(0x42b17217u)) return __int_as_float(0x7f800000);
    if (x < -__uint_as_float(0x42cff1b4u)) return 0.0f;
    const double shift = __longlong_as_double(0x4338000000000000ll);
    const double inv = __longlong_as_double(0x40471547652b82fell);
    const double c0 = __longlong_as_double(0x3ebc6af84b912394ll);
    const double c1 = __longlong_as_double(0x3f2ebfce50fac4f3ll);
    const double c2 = __longlong_as_double(0x3f962e42ff0c52d6ll);
    double xd = (double)x;
    double kd = __dadd_rn(__dmul_rn(inv, xd), shift);
    u64 ki = (u64)__double_as_longlong(kd);
    kd = __dsub_rn(kd, shift);
    double r = __fma_rn(inv, xd, -kd);
    u64 t = EXP_TAB[ki % 32] + (ki << 47);
    double s = __longlong_as_double((long long)t);
    double z = __fma_rn(c0, r, c1);
    double r2 = __dmul_rn(r, r);
    double y = __fma_rn(c2, r, 1.0);
    y = __fma_rn(z, r2, y);
    return __double2float_rn(__dmul_rn(y, s));
}

// ---------------------------------------------------------------- conversions
// Element-wise f32 <-> f16/bf16 (round to nearest even), `n` elements.
extern "C" __global__ void f32_to_f16_kernel(const float* __restrict__ x, u16* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = f32_to_f16(x[i]);
}

extern "C" __global__ void f16_to_f32_kernel(const u16* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = f16_to_f32(x[i]);
}

extern "C" __global__ void f32_to_bf16_kernel(const float* __restrict__ x, u16* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = f32_to_bf16(x[i]);
}

extern "C" __global__ void bf16_to_f32_kernel(const u16* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = bf16_to_f32(x[i]);
}

// ---------------------------------------------------------------- quantizers
// Q8_0 activations, llama.cpp's run-time flavor: d = amax / 127,
// q = rint(x * (127 / amax)). One warp per 32-value block.
//   x:  [n_blocks * 32] f32
//   qs: [n_blocks * 32] i8
//   d:  [n_blocks] f32, the scale rounded through f16 (the stored value)
extern "C" __global__ void quantize_q8_0(const float* __restrict__ x, i8* __restrict__ qs,
                                         float* __restrict__ d, int n_blocks) {
    int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (b >= n_blocks) return;
    float v = x[(size_t)b * 32 + lane];
    float amax = warp_max(fabsf(v));
    float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    qs[(size_t)b * 32 + lane] = (i8)(int)rintf(__fmul_rn(v, id));
    if (lane == 0) d[b] = f16_to_f32(f32_to_f16(__fdiv_rn(amax, 127.0f)));
}

// Q8_K activations (ggml's quantize_row_q8_K): the value of largest
// magnitude (first on ties) sets iscale = -127 / max; q = min(rn(iscale*x),
// 127); bsums are the sums of 16 consecutive quants. One warp per 256-value
// block, 8 values per lane.
//   x:     [n_blocks * 256] f32
//   qs:    [n_blocks * 256] i8
//   d:     [n_blocks] f32 (1 / iscale)
//   bsums: [n_blocks * 16] i32
extern "C" __global__ void quantize_q8_k(const float* __restrict__ x, i8* __restrict__ qs,
                                         float* __restrict__ d, int* __restrict__ bsums, int n_blocks) {
    int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (b >= n_blocks) return;
    const float* xb = x + (size_t)b * 256 + lane * 8;
    float v[8];
    float amax = 0.0f, max = 0.0f;
    int idx = 0;
    for (int i = 0; i < 8; i++) {
        v[i] = xb[i];
        float ax = fabsf(v[i]);
        if (ax > amax) { amax = ax; max = v[i]; idx = lane * 8 + i; }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float oa = __shfl_xor_sync(FULL_MASK, amax, o);
        float om = __shfl_xor_sync(FULL_MASK, max, o);
        int oi = __shfl_xor_sync(FULL_MASK, idx, o);
        if (oa > amax || (oa == amax && oa != 0.0f && oi < idx)) { amax = oa; max = om; idx = oi; }
    }
    i8* qb = qs + (size_t)b * 256 + lane * 8;
    if (max == 0.0f) {
        for (int i = 0; i < 8; i++) qb[i] = 0;
        if ((lane & 1) == 0) bsums[(size_t)b * 16 + (lane >> 1)] = 0;
        if (lane == 0) d[b] = 0.0f;
        return;
    }
    float iscale = __fdiv_rn(-127.0f, max);
    int sum = 0;
    for (int i = 0; i < 8; i++) {
        int q = min(__float2int_rn(__fmul_rn(iscale, v[i])), 127);
        qb[i] = (i8)q;
        sum += q;
    }
    sum += __shfl_xor_sync(FULL_MASK, sum, 1);
    if ((lane & 1) == 0) bsums[(size_t)b * 16 + (lane >> 1)] = (int)(short)sum;
    if (lane == 0) d[b] = __fdiv_rn(1.0f, iscale);
}

// ---------------------------------------------------------------- products
// out[t, r] = W[r, :] · a[t, :] for Q8_0 weights and Q8_0 activations.
// Weights are repacked on upload: quants [rows, n] i8 (each row's 32-value
// blocks back to back, 16-byte aligned) and scales [rows, n / 32] f32.
//   aq: [n_tok, n] i8, ad: [n_tok, n / 32] f32, out: [n_tok, rows] f32
// Grid: x = token tiles of TOK_TILE (fastest, so tiles of one row block run
// together and share its weights in L2), y = row groups of
// (blockDim.x / 32) · R rows (each warp takes R consecutive rows, so every
// activation load serves R rows). Lane l takes blocks l, l + 32, ... of a
// row; each block's integer dot is exact (dp4a), scaled as the CPU does
// (s * (dw * da)), and the warp's lanes are summed by the butterfly. A
// (row, token) result is the same bits for every R and T (tokens per warp
// pass): the variants differ only in how many rows and tokens share a warp.
template <int R, int T>
__device__ __forceinline__ void matmul_q8_0_impl(const i8* __restrict__ wq, const float* __restrict__ wd,
                                                 const i8* __restrict__ aq, const float* __restrict__ ad,
                                                 float* __restrict__ out, int rows, int n, int n_tok) {
    int lane = threadIdx.x & 31;
    int row0 = (blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5)) * R;
    int t0 = blockIdx.x * T;
    if (row0 >= rows) return;
    int nr = min(R, rows - row0);
    int nt = min(T, n_tok - t0);
    int nb = n >> 5;
    float acc[R][T];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < T; t++) acc[r][t] = 0.0f;
    for (int b = lane; b < nb; b += 32) {
        int4 w0[R], w1[R];
        float dw[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r < nr) {
                const int4* w4 = (const int4*)(wq + (size_t)(row0 + r) * n);
                w0[r] = w4[2 * b];
                w1[r] = w4[2 * b + 1];
                dw[r] = wd[(size_t)(row0 + r) * nb + b];
            }
        }
#pragma unroll
        for (int t = 0; t < T; t++) {
            if (t < nt) {
                size_t tok = (size_t)(t0 + t);
                const int4* a4 = (const int4*)(aq + tok * n);
                int4 a0 = a4[2 * b], a1 = a4[2 * b + 1];
                float da = ad[tok * nb + b];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    if (r < nr) {
                        int s = __dp4a(w0[r].x, a0.x, 0);
                        s = __dp4a(w0[r].y, a0.y, s);
                        s = __dp4a(w0[r].z, a0.z, s);
                        s = __dp4a(w0[r].w, a0.w, s);
                        s = __dp4a(w1[r].x, a1.x, s);
                        s = __dp4a(w1[r].y, a1.y, s);
                        s = __dp4a(w1[r].z, a1.z, s);
                        s = __dp4a(w1[r].w, a1.w, s);
                        acc[r][t] = __fadd_rn(acc[r][t], __fmul_rn((float)s, __fmul_rn(dw[r], da)));
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int t = 0; t < T; t++) {
            if (r < nr && t < nt) {
                float v = warp_sum(acc[r][t]);
                if (lane == 0) out[(size_t)(t0 + t) * rows + row0 + r] = v;
            }
        }
    }
}

extern "C" __global__ void matmul_q8_0(const i8* __restrict__ wq, const float* __restrict__ wd,
                                       const i8* __restrict__ aq, const float* __restrict__ ad,
                                       float* __restrict__ out, int rows, int n, int n_tok) {
    matmul_q8_0_impl<1, TOK_TILE>(wq, wd, aq, ad, out, rows, n, n_tok);
}

// One token, one row per warp: the decode matvec (few registers, so many
// warps per multiprocessor keep many weight loads in flight). Grid x = 1
// token tile of one token.
extern "C" __global__ void matmul_q8_0_t1(const i8* __restrict__ wq, const float* __restrict__ wd,
                                          const i8* __restrict__ aq, const float* __restrict__ ad,
                                          float* __restrict__ out, int rows, int n, int n_tok) {
    matmul_q8_0_impl<1, 1>(wq, wd, aq, ad, out, rows, n, n_tok);
}

extern "C" __global__ void matmul_q8_0_r4(const i8* __restrict__ wq, const float* __restrict__ wd,
                                          const i8* __restrict__ aq, const float* __restrict__ ad,
                                          float* __restrict__ out, int rows, int n, int n_tok) {
    matmul_q8_0_impl<4, TOK_TILE>(wq, wd, aq, ad, out, rows, n, n_tok);
}

// out[t, r] = W[r, :] · a[t, :] for Q4_K weights (ggml's 144-byte blocks,
// as in the file) and Q8_K activations.
//   w:  [rows, n / 256] Q4_K blocks
//   aq: [n_tok, n] i8, ad: [n_tok, n / 256] f32, absums: [n_tok, n / 16] i32
//   out: [n_tok, rows] f32
// Grid as matmul_q8_0. A lane's unit is one 32-value sub-block j of one
// super-block b (lane l takes units l, l + 32, ...): the exact integer dot
// of its 4-bit quants with the activations and the min term from the
// activations' bsums, scaled as (d·da)·(sc·isum) − (dmin·da)·(m·bsum).
template <int R, int T>
__device__ __forceinline__ void matmul_q4_k_impl(const u8* __restrict__ w, const i8* __restrict__ aq,
                                                 const float* __restrict__ ad, const int* __restrict__ absums,
                                                 float* __restrict__ out, int rows, int n, int n_tok) {
    int lane = threadIdx.x & 31;
    int row0 = (blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5)) * R;
    int t0 = blockIdx.x * T;
    if (row0 >= rows) return;
    int nr = min(R, rows - row0);
    int nt = min(T, n_tok - t0);
    int nb = n >> 8;
    int units = nb * 8;
    float acc[R][T];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < T; t++) acc[r][t] = 0.0f;
    for (int u = lane; u < units; u += 32) {
        int b = u >> 3, j = u & 7;
        int sh = (j & 1) * 4;
        float d[R], dmin[R];
        int s[R], m[R];
        int wv[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r < nr) {
                const u8* blk = w + ((size_t)(row0 + r) * nb + b) * 144;
                d[r] = f16_to_f32(*(const u16*)blk);
                dmin[r] = f16_to_f32(*(const u16*)(blk + 2));
                const u8* sc = blk + 4;
                if (j < 4) {
                    s[r] = sc[j] & 63;
                    m[r] = sc[j + 4] & 63;
                } else {
                    s[r] = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
                    m[r] = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
                }
                const int4* q4 = (const int4*)(blk + 16 + (j >> 1) * 32);
                int4 qa = q4[0], qb = q4[1];
                wv[r][0] = (qa.x >> sh) & 0x0F0F0F0F;
                wv[r][1] = (qa.y >> sh) & 0x0F0F0F0F;
                wv[r][2] = (qa.z >> sh) & 0x0F0F0F0F;
                wv[r][3] = (qa.w >> sh) & 0x0F0F0F0F;
                wv[r][4] = (qb.x >> sh) & 0x0F0F0F0F;
                wv[r][5] = (qb.y >> sh) & 0x0F0F0F0F;
                wv[r][6] = (qb.z >> sh) & 0x0F0F0F0F;
                wv[r][7] = (qb.w >> sh) & 0x0F0F0F0F;
            }
        }
#pragma unroll
        for (int t = 0; t < T; t++) {
            if (t < nt) {
                size_t tok = (size_t)(t0 + t);
                const int4* a4 = (const int4*)(aq + tok * n + (size_t)b * 256 + j * 32);
                int4 a0 = a4[0], a1 = a4[1];
                const int* bs = absums + tok * (size_t)(n >> 4) + b * 16 + 2 * j;
                int bsum = bs[0] + bs[1];
                float da = ad[tok * nb + b];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    if (r < nr) {
                        int isum = __dp4a(wv[r][0], a0.x, 0);
                        isum = __dp4a(wv[r][1], a0.y, isum);
                        isum = __dp4a(wv[r][2], a0.z, isum);
                        isum = __dp4a(wv[r][3], a0.w, isum);
                        isum = __dp4a(wv[r][4], a1.x, isum);
                        isum = __dp4a(wv[r][5], a1.y, isum);
                        isum = __dp4a(wv[r][6], a1.z, isum);
                        isum = __dp4a(wv[r][7], a1.w, isum);
                        float pos = __fmul_rn(__fmul_rn(d[r], da), (float)(s[r] * isum));
                        float neg = __fmul_rn(__fmul_rn(dmin[r], da), (float)(m[r] * bsum));
                        acc[r][t] = __fadd_rn(acc[r][t], __fsub_rn(pos, neg));
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int t = 0; t < T; t++) {
            if (r < nr && t < nt) {
                float v = warp_sum(acc[r][t]);
                if (lane == 0) out[(size_t)(t0 + t) * rows + row0 + r] = v;
            }
        }
    }
}

extern "C" __global__ void matmul_q4_k(const u8* __restrict__ w, const i8* __restrict__ aq,
                                       const float* __restrict__ ad, const int* __restrict__ absums,
                                       float* __restrict__ out, int rows, int n, int n_tok) {
    matmul_q4_k_impl<1, TOK_TILE>(w, aq, ad, absums, out, rows, n, n_tok);
}

extern "C" __global__ void matmul_q4_k_t1(const u8* __restrict__ w, const i8* __restrict__ aq,
                                          const float* __restrict__ ad, const int* __restrict__ absums,
                                          float* __restrict__ out, int rows, int n, int n_tok) {
    matmul_q4_k_impl<1, 1>(w, aq, ad, absums, out, rows, n, n_tok);
}

extern "C" __global__ void matmul_q4_k_r4(const u8* __restrict__ w, const i8* __restrict__ aq,
                                          const float* __restrict__ ad, const int* __restrict__ absums,
                                          float* __restrict__ out, int rows, int n, int n_tok) {
    matmul_q4_k_impl<4, TOK_TILE>(w, aq, ad, absums, out, rows, n, n_tok);
}

// ---------------------------------------------------------------- row ops
// RMSNorm, the CPU's arithmetic exactly: squares summed in f64 in 16 lanes
// (element i into lane i % 16, in order), lanes combined as the CPU's
// lane_sum, mean as f32, scale = 1 / sqrt(mean + eps), out = (x·scale)·w.
// One block per row: the whole block first copies the row into shared
// memory (n floats of dynamic shared memory), so the 16 sequential lane
// sums read shared memory, not global memory, on their dependent chains.
//   x, out: [n_rows, n] f32; w: [n] f32
extern "C" __global__ void rms_norm(const float* __restrict__ x, const float* __restrict__ w,
                                    float* __restrict__ out, int n, float eps) {
    extern __shared__ float xs[];
    __shared__ double lanes[16];
    __shared__ float scale_s;
    int tid = threadIdx.x;
    const float* xr = x + (size_t)blockIdx.x * n;
    if ((n & 3) == 0) {
        // 16-byte loads, several in flight per thread.
        const float4* x4 = (const float4*)xr;
        float4* s4 = (float4*)xs;
#pragma unroll 4
        for (int i = tid; i < (n >> 2); i += blockDim.x) s4[i] = x4[i];
    } else {
        for (int i = tid; i < n; i += blockDim.x) xs[i] = xr[i];
    }
    __syncthreads();
    if (tid < 16) {
        double s = 0.0;
#pragma unroll 8
        for (int i = tid; i < n; i += 16) {
            double v = (double)xs[i];
            s = __dadd_rn(s, __dmul_rn(v, v));
        }
        lanes[tid] = s;
    }
    __syncthreads();
    if (tid == 0) {
        double v[4];
        for (int j = 0; j < 4; j++) {
            v[j] = __dadd_rn(__dadd_rn(lanes[j], lanes[4 + j]), __dadd_rn(lanes[8 + j], lanes[12 + j]));
        }
        double sum = __dadd_rn(__dadd_rn(v[0], v[2]), __dadd_rn(v[1], v[3]));
        float mean = __double2float_rn(__ddiv_rn(sum, (double)n));
        scale_s = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
    }
    __syncthreads();
    float scale = scale_s;
    float* o = out + (size_t)blockIdx.x * n;
#pragma unroll 4
    for (int i = tid; i < n; i += blockDim.x) o[i] = __fmul_rn(__fmul_rn(xs[i], scale), w[i]);
}

// Softmax of each row, the CPU's arithmetic exactly: exp(x - max) with the
// CPU's expf, summed in f64 in 8 lanes (element i into lane i % 8), lanes
// combined as lane_sum, then x · (float)(1 / sum). One block of 32 threads
// per row.
//   x: [n_rows, n] f32, in place
extern "C" __global__ void softmax_rows(float* __restrict__ x, int n) {
    __shared__ double lanes[8];
    __shared__ float max_s;
    __shared__ float inv_s;
    int lane = threadIdx.x;
    float* xr = x + (size_t)blockIdx.x * n;
    float m = -__int_as_float(0x7f800000);
    for (int i = lane; i < n; i += 32) m = fmaxf(m, xr[i]);
    m = warp_max(m);
    if (lane == 0) max_s = m;
    __syncthreads();
    if (lane < 8) {
        double s = 0.0;
        for (int i = lane; i < n; i += 8) {
            float e = fak_expf(__fsub_rn(xr[i], max_s));
            xr[i] = e;
            s = __dadd_rn(s, (double)e);
        }
        lanes[lane] = s;
    }
    __syncthreads();
    if (lane == 0) {
        double v[4];
        for (int j = 0; j < 4; j++) v[j] = __dadd_rn(lanes[j], lanes[4 + j]);
        double sum = __dadd_rn(__dadd_rn(v[0], v[2]), __dadd_rn(v[1], v[3]));
        inv_s = __double2float_rn(__ddiv_rn(1.0, sum));
    }
    __syncthreads();
    for (int i = lane; i < n; i += 32) xr[i] = __fmul_rn(xr[i], inv_s);
}

// RoPE in place with host-computed angles (the CPU's cos/sin table).
//   x:  [n_tok, n_heads * hd] f32
//   cs: [n_tok, rope_dim / 2] (cos, sin) pairs
//   style: 0 normal (pairs 2i, 2i+1), 1 neox (pairs i, i + rope_dim / 2)
// One block per token.
extern "C" __global__ void rope(float* __restrict__ x, const float2* __restrict__ cs, int n_heads,
                                int hd, int rope_dim, int style) {
    int t = blockIdx.x;
    int half = rope_dim >> 1;
    float* xt = x + (size_t)t * n_heads * hd;
    const float2* ct = cs + (size_t)t * half;
    for (int idx = threadIdx.x; idx < n_heads * half; idx += blockDim.x) {
        int h = idx / half, i = idx % half;
        float* head = xt + (size_t)h * hd;
        int ia = style == 0 ? 2 * i : i;
        int ib = style == 0 ? 2 * i + 1 : i + half;
        float a = head[ia], b = head[ib];
        float c = ct[i].x, s = ct[i].y;
        head[ia] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
        head[ib] = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
    }
}

// gate = silu(gate) · up = gate / (1 + expf(-gate)) · up, the CPU's
// arithmetic. gate, up: [n] f32.
extern "C" __global__ void swiglu(float* __restrict__ gate, const float* __restrict__ up, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = gate[i];
        gate[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, fak_expf(-g))), up[i]);
    }
}

// x[i] += y[i]; x, y: [n] f32.
extern "C" __global__ void add_assign(float* __restrict__ x, const float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __fadd_rn(x[i], y[i]);
}

// x[t, i] += b[i]; x: [n_tok, m] f32, b: [m] f32.
extern "C" __global__ void add_bias(float* __restrict__ x, const float* __restrict__ b, int m, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __fadd_rn(x[i], b[i % m]);
}

// out[j, :] = x[idx[j], :]; x: [*, d] f32, out: [n_idx, d] f32.
extern "C" __global__ void gather_rows(const float* __restrict__ x, const int* __restrict__ idx,
                                       float* __restrict__ out, int d) {
    int j = blockIdx.x;
    const float* src = x + (size_t)idx[j] * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) out[(size_t)j * d + i] = src[i];
}

// ---------------------------------------------------------------- KV + attention
// Writes each token's key and value rows (f32 -> f16) into its sequence
// slot's rows of one layer.
//   k, v:   [n_tok, kv_dim] f32
//   kc, vc: [n_slots, n_ctx, kv_dim] f16 bits
//   slot, pos: [n_tok] i32
extern "C" __global__ void kv_write(const float* __restrict__ k, const float* __restrict__ v,
                                    u16* __restrict__ kc, u16* __restrict__ vc,
                                    const int* __restrict__ slot, const int* __restrict__ pos,
                                    int kv_dim, int n_ctx) {
    int t = blockIdx.x;
    size_t base = ((size_t)slot[t] * n_ctx + pos[t]) * kv_dim;
    for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
        kc[base + i] = f32_to_f16(k[(size_t)t * kv_dim + i]);
        vc[base + i] = f32_to_f16(v[(size_t)t * kv_dim + i]);
    }
}

// Causal attention of each token's query heads over its own sequence's keys
// 0..=pos (grouped-query: query head h reads KV head h / (n_head /
// n_head_kv)), split into chunks of ATTN_CHUNK keys (flash-decoding):
//
//   attention_chunks   grid (n_tok, n_head, n_chunks), 128 threads (4 warps):
//                      chunk c of keys [c·CHUNK, min(nk, (c+1)·CHUNK)) →
//                      m_c (max score), l_c = Σ exp(s − m_c), o_c = Σ exp(s − m_c)·v
//   attention_combine  grid (n_tok, n_head): M = max m_c, L = Σ l_c·exp(m_c − M),
//                      out = (Σ o_c·exp(m_c − M)) · (1 / L), chunks in order
//
// Inside a chunk: warp w takes keys w, w + 4, ...; lane l owns dims
// l·per .. l·per + per (per = hd / 32); a score is the lane's ordered sum
// then the warp butterfly; softmax terms use the CPU's expf; the value sums
// walk each warp's keys in order and add the 4 warps' partials w = 0..3.
// The chunking depends only on the token's own position, so every order is
// fixed by (pos, hd): bit-identical whatever else the batch holds.
//   q:    [n_tok, n_head * hd] f32 (roped)
//   kc, vc: [n_slots, n_ctx, n_head_kv * hd] f16 bits
//   part: [n_tok, n_head, n_chunks, hd + 2] f32 scratch
//   out:  [n_tok, n_head * hd] f32
#define ATTN_CHUNK 128
#define ATTN_WARPS 4
extern "C" __global__ void attention_chunks(const float* __restrict__ q, const u16* __restrict__ kc,
                                            const u16* __restrict__ vc, const int* __restrict__ slot,
                                            const int* __restrict__ pos, float* __restrict__ part,
                                            int n_head, int n_head_kv, int hd, int n_ctx, float scale,
                                            int n_chunks) {
    __shared__ float qs[256];
    __shared__ float sc[ATTN_CHUNK];
    __shared__ float pw[ATTN_WARPS * 256];
    __shared__ float red[32];
    int t = blockIdx.x, h = blockIdx.y, c = blockIdx.z;
    int nk = pos[t] + 1;
    int j0 = c * ATTN_CHUNK;
    if (j0 >= nk) return;  // the whole block: no barrier is skipped by part of it
    int j1 = min(nk, j0 + ATTN_CHUNK);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int group = n_head / n_head_kv;
    int kvh = h / group;
    int kv_dim = n_head_kv * hd;
    int q_dim = n_head * hd;
    int per = hd >> 5;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) qs[i] = q[(size_t)t * q_dim + (size_t)h * hd + i];
    __syncthreads();
    size_t base = (size_t)slot[t] * n_ctx * kv_dim + (size_t)kvh * hd;
    const u16* kb = kc + base;
    const u16* vb = vc + base;
    int d0 = lane * per;
    float m = -__int_as_float(0x7f800000);
    for (int j = j0 + warp; j < j1; j += ATTN_WARPS) {
        const u16* kr = kb + (size_t)j * kv_dim + d0;
        float s = 0.0f;
        for (int k = 0; k < per; k++) s = __fadd_rn(s, __fmul_rn(qs[d0 + k], f16_to_f32(kr[k])));
        s = __fmul_rn(warp_sum(s), scale);
        if (lane == 0) sc[j - j0] = s;
        m = fmaxf(m, s);
    }
    m = block_max(m, red);
    float psum = 0.0f;
    for (int j = j0 + (int)threadIdx.x; j < j1; j += blockDim.x) {
        float e = fak_expf(__fsub_rn(sc[j - j0], m));
        sc[j - j0] = e;
        psum = __fadd_rn(psum, e);
    }
    float l = block_sum(psum, red);
    float o[8];
    for (int k = 0; k < per; k++) o[k] = 0.0f;
    for (int j = j0 + warp; j < j1; j += ATTN_WARPS) {
        const u16* vr = vb + (size_t)j * kv_dim + d0;
        float p = sc[j - j0];
        for (int k = 0; k < per; k++) o[k] = __fadd_rn(o[k], __fmul_rn(p, f16_to_f32(vr[k])));
    }
    for (int k = 0; k < per; k++) pw[warp * hd + d0 + k] = o[k];
    __syncthreads();
    float* dst = part + (((size_t)t * n_head + h) * n_chunks + c) * (hd + 2);
    if (threadIdx.x == 0) {
        dst[0] = m;
        dst[1] = l;
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float r = pw[d];
        for (int w = 1; w < ATTN_WARPS; w++) r = __fadd_rn(r, pw[w * hd + d]);
        dst[2 + d] = r;
    }
}

extern "C" __global__ void attention_combine(const float* __restrict__ part, const int* __restrict__ pos,
                                             float* __restrict__ out, int n_head, int hd, int n_chunks) {
    int t = blockIdx.x, h = blockIdx.y;
    int nc = (pos[t] + ATTN_CHUNK) / ATTN_CHUNK;
    const float* src = part + ((size_t)t * n_head + h) * n_chunks * (hd + 2);
    float mx = -__int_as_float(0x7f800000);
    for (int c = 0; c < nc; c++) mx = fmaxf(mx, src[(size_t)c * (hd + 2)]);
    float l = 0.0f;
    for (int c = 0; c < nc; c++) {
        const float* pc = src + (size_t)c * (hd + 2);
        l = __fadd_rn(l, __fmul_rn(pc[1], fak_expf(__fsub_rn(pc[0], mx))));
    }
    float inv = __fdiv_rn(1.0f, l);
    int q_dim = n_head * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int c = 0; c < nc; c++) {
            const float* pc = src + (size_t)c * (hd + 2);
            o = __fadd_rn(o, __fmul_rn(pc[2 + d], fak_expf(__fsub_rn(pc[0], mx))));
        }
        out[(size_t)t * q_dim + (size_t)h * hd + d] = __fmul_rn(o, inv);
    }
}
