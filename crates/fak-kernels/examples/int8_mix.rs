//! Which exact int8 instruction mix runs fastest on this CPU? Times four
//! ways to compute the same `i32` sums of a Q8_0 × Q8_0 product tile
//! (8 weight rows × 4 tokens, 4 values per step: 128 multiply-adds per
//! step), on data that stays in L1, one thread. Each pattern's sums are
//! checked against a scalar loop before it is timed.
//!
//! ```text
//!   sign      per token: maddubs(|w|, sign(x, w)), madd(·, 1), add
//!             (the packed Q8_0 kernel's step; |w| once per step)
//!   nibble    w + 128 = 16·hi + lo stored as bytes; per token:
//!             maddubs(lo, x), maddubs(hi, x), two i16 adds; per block of
//!             8 steps: madd(·, 1), madd(·, 16) and the −128·Σx offset
//!   i16-mem   weights widened to i16 in memory; per token: two madds
//!   i16-reg   weights widened per step (vpmovsxbw); per token: two madds
//! ```
//!
//! `cargo run --release -p fak-kernels --example int8_mix` (AVX2 only;
//! 11 alternated rounds; best, median and worst GMAC/s of each pattern).

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::time::Instant;

    /// Steps (of 4 values) in the data set: 8 blocks of 32 values.
    pub const STEPS: usize = 64;
    /// Tokens per tile.
    const T: usize = 4;

    /// The data: `w[step][row][i]` and `x[token][step][i]`.
    pub struct Data {
        pub w: Vec<[[i8; 4]; 8]>,
        pub x: Vec<Vec<[i8; 4]>>,
    }

    impl Data {
        pub fn new(seed: u32) -> Data {
            let mut s = seed;
            let mut next = || {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                ((s >> 16) % 255) as i32 - 127
            };
            let mut w = vec![[[0i8; 4]; 8]; STEPS];
            for st in w.iter_mut() {
                for row in st.iter_mut() {
                    for v in row.iter_mut() {
                        *v = next() as i8;
                    }
                }
            }
            // One weight of -128, which the sign route must survive.
            w[3][5][2] = -128;
            let x = (0..T)
                .map(|_| {
                    (0..STEPS)
                        .map(|_| std::array::from_fn(|_| next() as i8))
                        .collect()
                })
                .collect();
            Data { w, x }
        }

        /// `sums[t][r]` = Σ over all steps of row `r` · token `t`.
        pub fn scalar(&self) -> [[i32; 8]; T] {
            let mut s = [[0i32; 8]; T];
            for (t, st) in s.iter_mut().enumerate() {
                for (k, wk) in self.w.iter().enumerate() {
                    for (acc, wr) in st.iter_mut().zip(wk) {
                        for (&wv, &xv) in wr.iter().zip(&self.x[t][k]) {
                            *acc += i32::from(wv) * i32::from(xv);
                        }
                    }
                }
            }
            s
        }

        /// Weight step `k` as 32 bytes (rows × 4 values).
        fn w_bytes(&self, k: usize) -> [u8; 32] {
            std::array::from_fn(|p| self.w[k][p / 4][p % 4] as u8)
        }

        /// Token `t`'s 4 values of step `k` as one `i32`.
        fn x_quad(&self, t: usize, k: usize) -> i32 {
            i32::from_le_bytes(self.x[t][k].map(|v| v as u8))
        }

        /// Token `t`'s values `4k + 2h`, `4k + 2h + 1` as two `i16` in an `i32`.
        fn x_pair(&self, t: usize, k: usize, h: usize) -> i32 {
            let lo = i32::from(self.x[t][k][2 * h]) & 0xffff;
            let hi = i32::from(self.x[t][k][2 * h + 1]);
            lo | hi << 16
        }
    }

    /// The prepared operands of every pattern.
    pub struct Prepared {
        /// `[STEPS]` × 32 bytes, as the packed Q8_0 layout.
        w8: Vec<[u8; 32]>,
        /// The same plus 128 (the nibble pattern's unsigned bytes).
        wu: Vec<[u8; 32]>,
        /// `[STEPS][2]` halves widened to `i16`: half `h` = rows × values
        /// `2h, 2h + 1`.
        w16: Vec<[[i16; 16]; 2]>,
        /// The i16-reg pattern's bytes: `[STEPS][2]` halves of 16 bytes.
        w8h: Vec<[[u8; 16]; 2]>,
        /// `[T][STEPS]` activation quads.
        xq: Vec<Vec<i32>>,
        /// `[T][STEPS][2]` activation `i16` pairs.
        xp: Vec<Vec<[i32; 2]>>,
        /// `[T][blocks]` `128 · Σx` per block of 8 steps.
        x128: Vec<Vec<i32>>,
    }

    impl Prepared {
        pub fn new(d: &Data) -> Prepared {
            let w8: Vec<[u8; 32]> = (0..STEPS).map(|k| d.w_bytes(k)).collect();
            let wu = w8.iter().map(|b| b.map(|v| v ^ 0x80)).collect();
            let half = |k: usize, h: usize| -> [i16; 16] {
                std::array::from_fn(|p| i16::from(d.w[k][p / 2][2 * h + p % 2]))
            };
            let w16 = (0..STEPS).map(|k| [half(k, 0), half(k, 1)]).collect();
            let w8h = (0..STEPS)
                .map(|k| [half(k, 0).map(|v| v as u8), half(k, 1).map(|v| v as u8)])
                .collect();
            let xq = (0..T)
                .map(|t| (0..STEPS).map(|k| d.x_quad(t, k)).collect())
                .collect();
            let xp = (0..T)
                .map(|t| {
                    (0..STEPS)
                        .map(|k| [d.x_pair(t, k, 0), d.x_pair(t, k, 1)])
                        .collect()
                })
                .collect();
            let x128 = (0..T)
                .map(|t| {
                    (0..STEPS / 8)
                        .map(|b| {
                            let s: i32 = (8 * b..8 * b + 8)
                                .flat_map(|k| d.x[t][k])
                                .map(i32::from)
                                .sum();
                            128 * s
                        })
                        .collect()
                })
                .collect();
            Prepared {
                w8,
                wu,
                w16,
                w8h,
                xq,
                xp,
                x128,
            }
        }
    }

    fn lanes(v: [__m256i; T]) -> [[i32; 8]; T] {
        v.map(|x| {
            let mut o = [0i32; 8];
            // SAFETY: 8 writable i32.
            unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), x) };
            o
        })
    }

    /// The sign-trick step, `reps` passes over the data.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn sign(p: &Prepared, reps: usize) -> [[i32; 8]; T] {
        let ones = _mm256_set1_epi16(1);
        let mut s = [_mm256_setzero_si256(); T];
        for _ in 0..reps {
            for (k, wb) in p.w8.iter().enumerate() {
                // SAFETY: `wb` is 32 readable bytes, the unaligned load's size.
                let w = unsafe { _mm256_loadu_si256(wb.as_ptr().cast()) };
                let aw = _mm256_sign_epi8(w, w);
                for (st, xq) in s.iter_mut().zip(&p.xq) {
                    let x = _mm256_set1_epi32(xq[k]);
                    let m = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w));
                    *st = _mm256_add_epi32(*st, _mm256_madd_epi16(m, ones));
                }
            }
        }
        lanes(s)
    }

    /// The nibble-split step.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn nibble(p: &Prepared, reps: usize) -> [[i32; 8]; T] {
        let (ones, sixteen, low) = (
            _mm256_set1_epi16(1),
            _mm256_set1_epi16(16),
            _mm256_set1_epi8(15),
        );
        let mut s = [_mm256_setzero_si256(); T];
        for _ in 0..reps {
            for (b, block) in p.wu.chunks_exact(8).enumerate() {
                let mut lo = [_mm256_setzero_si256(); T];
                let mut hi = [_mm256_setzero_si256(); T];
                for (kk, wb) in block.iter().enumerate() {
                    // SAFETY: `wb` is 32 readable bytes, the unaligned load's size.
                    let u = unsafe { _mm256_loadu_si256(wb.as_ptr().cast()) };
                    let ul = _mm256_and_si256(u, low);
                    let uh = _mm256_and_si256(_mm256_srli_epi16::<4>(u), low);
                    for t in 0..T {
                        let x = _mm256_set1_epi32(p.xq[t][8 * b + kk]);
                        lo[t] = _mm256_add_epi16(lo[t], _mm256_maddubs_epi16(ul, x));
                        hi[t] = _mm256_add_epi16(hi[t], _mm256_maddubs_epi16(uh, x));
                    }
                }
                for t in 0..T {
                    let v = _mm256_add_epi32(
                        _mm256_madd_epi16(lo[t], ones),
                        _mm256_madd_epi16(hi[t], sixteen),
                    );
                    let off = _mm256_set1_epi32(p.x128[t][b]);
                    s[t] = _mm256_add_epi32(s[t], _mm256_sub_epi32(v, off));
                }
            }
        }
        lanes(s)
    }

    /// One `i16` step for every token: `s[t] += madd(w0, x0) + madd(w1, x1)`
    /// with token `t`'s two pairs of step `k`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn i16_step(w0: __m256i, w1: __m256i, k: usize, p: &Prepared, s: &mut [__m256i; T]) {
        for (st, xp) in s.iter_mut().zip(&p.xp) {
            let [x0, x1] = xp[k];
            let m0 = _mm256_madd_epi16(w0, _mm256_set1_epi32(x0));
            let m1 = _mm256_madd_epi16(w1, _mm256_set1_epi32(x1));
            *st = _mm256_add_epi32(*st, _mm256_add_epi32(m0, m1));
        }
    }

    /// The `i16` step with weights widened in memory.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn i16_mem(p: &Prepared, reps: usize) -> [[i32; 8]; T] {
        let mut s = [_mm256_setzero_si256(); T];
        for _ in 0..reps {
            for (k, [h0, h1]) in p.w16.iter().enumerate() {
                // SAFETY: `h0` and `h1` are 16 i16 = 32 readable bytes each,
                // the unaligned load's size.
                let w0 = unsafe { _mm256_loadu_si256(h0.as_ptr().cast()) };
                // SAFETY: as above.
                let w1 = unsafe { _mm256_loadu_si256(h1.as_ptr().cast()) };
                i16_step(w0, w1, k, p, &mut s);
            }
        }
        lanes(s)
    }

    /// The `i16` step with weights widened per step.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn i16_reg(p: &Prepared, reps: usize) -> [[i32; 8]; T] {
        let mut s = [_mm256_setzero_si256(); T];
        for _ in 0..reps {
            for (k, [h0, h1]) in p.w8h.iter().enumerate() {
                // SAFETY: `h0` and `h1` are 16 readable bytes each, the
                // unaligned load's size.
                let w0 = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(h0.as_ptr().cast()) });
                // SAFETY: as above.
                let w1 = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(h1.as_ptr().cast()) });
                i16_step(w0, w1, k, p, &mut s);
            }
        }
        lanes(s)
    }

    /// A pattern: its name and its function.
    pub type Pattern = (&'static str, unsafe fn(&Prepared, usize) -> [[i32; 8]; T]);

    /// Every pattern.
    pub const PATTERNS: [Pattern; 4] = [
        ("sign", sign),
        ("nibble", nibble),
        ("i16-mem", i16_mem),
        ("i16-reg", i16_reg),
    ];

    /// Multiply-adds of one pass over the data.
    pub const PASS_MACS: usize = STEPS * 8 * 4 * T;

    /// Seconds for `reps` passes of pattern `f`.
    pub fn time(f: unsafe fn(&Prepared, usize) -> [[i32; 8]; T], p: &Prepared, reps: usize) -> f64 {
        let t = Instant::now();
        // SAFETY: the caller checked AVX2.
        let r = unsafe { f(p, reps) };
        std::hint::black_box(r);
        t.elapsed().as_secs_f64()
    }
}

/// Timed rounds; each runs every pattern once, in turn. Interference on
/// a shared machine only slows a round down, so the best round is the
/// steadiest figure of a pattern's speed.
#[cfg(target_arch = "x86_64")]
const ROUNDS: usize = 11;

#[cfg(target_arch = "x86_64")]
fn main() {
    use x86::*;
    if !std::arch::is_x86_feature_detected!("avx2") {
        eprintln!("int8_mix: this CPU has no AVX2");
        std::process::exit(2);
    }
    let d = Data::new(7);
    let p = Prepared::new(&d);
    let want = d.scalar();
    for (name, f) in PATTERNS {
        // SAFETY: AVX2 checked above.
        let got = unsafe { f(&p, 1) };
        if got != want {
            eprintln!("int8_mix: pattern {name} gives the wrong sums");
            std::process::exit(1);
        }
    }
    let reps = 200_000;
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); PATTERNS.len()];
    for _ in 0..ROUNDS {
        for (i, (_, f)) in PATTERNS.iter().enumerate() {
            let s = time(*f, &p, reps);
            rates[i].push((PASS_MACS * reps) as f64 / s / 1e9);
        }
    }
    println!(
        "isa: {}; one thread, L1-resident, {ROUNDS} alternated rounds",
        fak_kernels::isa()
    );
    for ((name, _), r) in PATTERNS.iter().zip(&mut rates) {
        r.sort_by(f64::total_cmp);
        println!(
            "{name:>8}: best {:6.1} GMAC/s, median {:6.1}, worst {:6.1}",
            r[ROUNDS - 1],
            r[ROUNDS / 2],
            r[0]
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    eprintln!("int8_mix: x86-64 only");
    std::process::exit(2);
}
