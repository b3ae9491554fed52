// fa2_fwd_sm80.cu: a FlashAttention-2-style forward kernel for sm_80, the CUDA twin of gpusim's FA2
// forward recipe (`gpusim_workloads::attention::fa2`, the d = 128 configuration on A100/H100:
// 128 x 64 tile, 4 warps). Our own code: inline PTX, no CUTLASS, no headers.
//
//   O = softmax(Q K^T * scale) V, non-causal, head dim 128, bf16 in and out, fp32 accumulation;
//   also LSE = rowmax * scale + ln(rowsum) (fp32), as FA2 returns it.
//   Q, K, V, O are [batch][seqlen][heads][128] bf16 (FlashAttention's bshd), row pitch heads * 128.
//   LSE is [batch][heads][seqlen_q] fp32.
//
// Launch configuration
//   grid   = dim3(seqlen_q / 128, batch, heads): CTA (x, y, z) computes query rows [128 x, 128 x + 128)
//            of request y, head z (FA2's grid).
//   block  = dim3(128, 1, 1): 4 warps along M, each owning 32 query rows and the whole 64-key
//            extent of S (FA2's TiledMMA Layout<4,1,1>).
//   dynamic shared memory = SMEM_BYTES = (128 + 2 * 64) * 128 * 2 B = 65 536 B (Q, K, V tiles, single
//            buffered as FA2's): first call cudaFuncSetAttribute(fa2_fwd_sm80,
//            cudaFuncAttributeMaxDynamicSharedMemorySize, 65536).
//   Kernel parameters (extern "C"): fa2_fwd_sm80(Q, K, V, O, LSE, seqlen_q, seqlen_k, heads,
//            scale_log2), scale_log2 = softmax_scale * log2(e).
//   Requirements: seqlen_q % 128 == 0, seqlen_k % 64 == 0, seqlen_k >= 64; 16-byte aligned tensors.
//   Compile: NVRTC or nvcc with --gpu-architecture=sm_80 (or later sm_8x/sm_90), -std=c++17.
//
// Structure (FA2's compute_attn_1rowblock), what the recipe must reproduce per KV iteration:
//   - prologue: cp.async Q (16 x 16 B per thread) and K(n_max - 1) (8 per thread), one commit group;
//   - KV blocks n = n_max - 1 down to 0 (the loop runs n_max - 1 times, the last block n = 0 is
//     peeled: it issues no K prefetch, as the recipe's last iteration):
//       cp.async.wait_group 0; __syncthreads(); cp.async V(n) (8 per thread); commit
//       S = Q K^T: 8 k-slices of 16 x [2 ldmatrix.x4 (Q, re-read from shared memory every iteration),
//         4 x (ldmatrix.x4 (K: two n8 atoms); 4 mma.sync m16n8k16)]
//       cp.async.wait_group 0; __syncthreads(); cp.async K(n - 1) (8 per thread); commit
//       online softmax in registers, per thread 4 rows x 16 columns: row max (FMNMX, then 2
//         shfl.bfly across the quad), per row ex2((m_old - m_new) * scale_log2) (4 MUFU.EX2), rescale
//         of the row sum and of O (128 FMUL), P = ex2(S * scale_log2 - m * scale_log2) (64 FFMA +
//         64 MUFU.EX2), thread-local row sums (FADD); P packed to bf16 in registers
//       O += P V: 4 k-slices of 16 x 8 x (ldmatrix.x4.trans (V^T: two n8 atoms of d); 4 mma.sync)
//     so per warp per iteration: 16 LDGSTS.128, 2 BAR, 80 LDSM (16 Q, 32 K, 32 V^T .trans),
//     256 HMMA.16816.F32.BF16, 68 MUFU.EX2.
//   - epilogue: quad-reduce the row sums, O / rowsum, 32-bit bf16x2 global stores straight from the
//     accumulators (FA2 goes through shared memory: not in the KV loop), LSE.
//
// Shared memory: Q [128][128], K [64][128], V [64][128] bf16, 256 B rows of 16 chunks of 16 B, chunk
// c of row r stored at chunk c ^ (r & 7): the 8 row addresses of every ldmatrix 8x8 matrix fall in
// distinct bank groups (FA2's Swizzle<3,3,3>).

#define D 128
#define BM 128
#define BN 64
#define WARPS 4
#define THREADS (32 * WARPS)
#define MS 2                        // m16 atoms per warp (32 rows)
#define NN (BN / 8)                 // n8 atoms of S per warp: 8
#define ND (D / 8)                  // n8 atoms of O per warp: 16
#define ROW_BYTES (D * 2)           // 256
#define SQ_OFF 0
#define SK_OFF (BM * ROW_BYTES)
#define SV_OFF (SK_OFF + BN * ROW_BYTES)
#define SMEM_BYTES (SV_OFF + BN * ROW_BYTES)

typedef unsigned short bf16_t;  // storage only

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Byte offset of 16-byte chunk `c` of row `r` in a swizzled 256-byte-row tile.
__device__ __forceinline__ unsigned swz(int r, int c) { return r * ROW_BYTES + ((c ^ (r & 7)) << 4); }

__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// exp2 with --use_fast_math semantics: one MUFU.EX2.
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float lg2(float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// A 64 x 128 K or V tile (rows [row0, row0 + 64) of the sequence) into shared memory: 1024 chunks,
// thread t takes chunks t + 128 i (row t / 16 + 8 i, chunk t % 16), 8 per thread. `src` is the
// thread's first chunk (row t / 16, chunk t % 16 of the head), `dst` its swizzled place in row t / 16.
__device__ __forceinline__ void load_kv(unsigned dst, const bf16_t* src, int row0, int pitch) {
#pragma unroll
    for (int i = 0; i < BN * 16 / THREADS; ++i)
        cp_async_16(dst + i * 8 * ROW_BYTES, src + (size_t)(row0 + 8 * i) * pitch);
}

struct State {
    float o[MS][ND][4];  // O accumulators
    float m[MS][2];      // row max (rows g and g + 8 of each m atom)
    float l[MS][2];      // thread-local row sums
};

// One KV block: K(n) is in flight or landed, V(n) is loaded here; with PREFETCH, K(n - 1) too.
template <bool PREFETCH>
__device__ __forceinline__ void kv_block(State& st, unsigned sbase, const bf16_t* gk, const bf16_t* gv, int n,
                                         int pitch, unsigned cp_dst, int lane, int warp, float scale_log2) {
    cp_async_wait_all();
    __syncthreads();  // K(n) has landed for everyone; everyone is done with V(n + 1)
    load_kv(sbase + SV_OFF + cp_dst, gv, n * BN, pitch);
    cp_async_commit();

    // S = Q K^T.
    float s[MS][NN][4];
#pragma unroll
    for (int i = 0; i < MS; ++i)
#pragma unroll
        for (int j = 0; j < NN; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[i][j][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
        unsigned qf[MS][4];
#pragma unroll
        for (int i = 0; i < MS; ++i) {
            // A (x4): lanes 0-15 rows 0-15 at k 0, lanes 16-31 rows 0-15 at k 8.
            const int row = warp * 32 + i * 16 + (lane & 15);
            ldmatrix_x4(qf[i], sbase + SQ_OFF + swz(row, 2 * ks + (lane >> 4)));
        }
#pragma unroll
        for (int j16 = 0; j16 < BN / 16; ++j16) {
            // B = K^T (x4, no transpose): matrices {n 0-7 k 0-7, n 0-7 k 8-15, n 8-15 k 0-7, n 8-15 k 8-15}.
            unsigned kf[4];
            const int row = j16 * 16 + (lane & 7) + ((lane >> 4) << 3);
            ldmatrix_x4(kf, sbase + SK_OFF + swz(row, 2 * ks + ((lane >> 3) & 1)));
#pragma unroll
            for (int i = 0; i < MS; ++i) {
                mma_bf16_16816(s[i][2 * j16], qf[i], kf[0], kf[1]);
                mma_bf16_16816(s[i][2 * j16 + 1], qf[i], kf[2], kf[3]);
            }
        }
    }

    cp_async_wait_all();
    __syncthreads();  // V(n) has landed; everyone is done with K(n)
    if (PREFETCH) {
        load_kv(sbase + SK_OFF + cp_dst, gk, (n - 1) * BN, pitch);
        cp_async_commit();
    }

    // Online softmax. Accumulator fragment: s[i][j][0..1] row g, s[i][j][2..3] row g + 8.
#pragma unroll
    for (int i = 0; i < MS; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = st.m[i][h];
#pragma unroll
            for (int j = 0; j < NN; ++j) mx = fmaxf(mx, fmaxf(s[i][j][2 * h], s[i][j][2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float sc = ex2((st.m[i][h] - mx) * scale_log2);
            st.m[i][h] = mx;
            st.l[i][h] *= sc;
#pragma unroll
            for (int j = 0; j < ND; ++j) {
                st.o[i][j][2 * h] *= sc;
                st.o[i][j][2 * h + 1] *= sc;
            }
            const float ms = mx * scale_log2;
#pragma unroll
            for (int j = 0; j < NN; ++j) {
#pragma unroll
                for (int k = 0; k < 2; ++k) {
                    const float p = ex2(fmaf(s[i][j][2 * h + k], scale_log2, -ms));
                    s[i][j][2 * h + k] = p;
                    st.l[i][h] += p;
                }
            }
        }
    }

    // O += P V. P's k-slice ks (keys 16 ks .. 16 ks + 15) is the A fragment of S atoms 2 ks, 2 ks + 1.
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
        unsigned pf[MS][4];
#pragma unroll
        for (int i = 0; i < MS; ++i) {
            pf[i][0] = pack_bf16x2(s[i][2 * ks][0], s[i][2 * ks][1]);
            pf[i][1] = pack_bf16x2(s[i][2 * ks][2], s[i][2 * ks][3]);
            pf[i][2] = pack_bf16x2(s[i][2 * ks + 1][0], s[i][2 * ks + 1][1]);
            pf[i][3] = pack_bf16x2(s[i][2 * ks + 1][2], s[i][2 * ks + 1][3]);
        }
#pragma unroll
        for (int jd = 0; jd < D / 16; ++jd) {
            // B = V (x4.trans): lanes 0-15 key rows 0-15 at d 0, lanes 16-31 key rows 0-15 at d 8.
            unsigned vf[4];
            const int row = ks * 16 + (lane & 15);
            ldmatrix_x4_trans(vf, sbase + SV_OFF + swz(row, 2 * jd + (lane >> 4)));
#pragma unroll
            for (int i = 0; i < MS; ++i) {
                mma_bf16_16816(st.o[i][2 * jd], pf[i], vf[0], vf[1]);
                mma_bf16_16816(st.o[i][2 * jd + 1], pf[i], vf[2], vf[3]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    fa2_fwd_sm80(const bf16_t* __restrict__ Q, const bf16_t* __restrict__ K, const bf16_t* __restrict__ V,
                 bf16_t* __restrict__ O, float* __restrict__ LSE, int seqlen_q, int seqlen_k, int heads,
                 float scale_log2) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const unsigned sbase = smem_u32(smem_raw);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m_block = blockIdx.x, b = blockIdx.y, h = blockIdx.z;
    const int pitch = heads * D;
    const bf16_t* gq = Q + ((size_t)b * seqlen_q + (size_t)m_block * BM) * pitch + h * D;
    // This thread's cp.async chunk: row tid / 16 (+ 8 i), chunk tid % 16.
    const int cp_row = tid >> 4, cp_ch = tid & 15;
    const unsigned cp_dst = swz(cp_row, cp_ch);
    const size_t cp_src = (size_t)cp_row * pitch + cp_ch * 8;
    const bf16_t* gk = K + (size_t)b * seqlen_k * pitch + h * D + cp_src;
    const bf16_t* gv = V + (size_t)b * seqlen_k * pitch + h * D + cp_src;
    const int n_max = seqlen_k / BN;

    // Prologue: Q and K(n_max - 1).
#pragma unroll
    for (int i = 0; i < BM * 16 / THREADS; ++i)
        cp_async_16(sbase + SQ_OFF + cp_dst + i * 8 * ROW_BYTES, gq + cp_src + (size_t)(8 * i) * pitch);
    load_kv(sbase + SK_OFF + cp_dst, gk, (n_max - 1) * BN, pitch);
    cp_async_commit();

    State st;
#pragma unroll
    for (int i = 0; i < MS; ++i) {
#pragma unroll
        for (int j = 0; j < ND; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) st.o[i][j][e] = 0.f;
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            st.m[i][k] = -1e30f;  // finite: ex2((m_old - m_new) * scale) is 0 on the first block
            st.l[i][k] = 0.f;
        }
    }

#pragma unroll 1
    for (int n = n_max - 1; n > 0; --n) kv_block<true>(st, sbase, gk, gv, n, pitch, cp_dst, lane, warp, scale_log2);
    kv_block<false>(st, sbase, gk, gv, 0, pitch, cp_dst, lane, warp, scale_log2);

    // Epilogue: row sums across the quad, O / l, LSE = m * scale + ln l.
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MS; ++i) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            float l = st.l[i][hh];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            float inv;
            asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(inv) : "f"(l));
            const int row = m_block * BM + warp * 32 + i * 16 + g + 8 * hh;
            bf16_t* orow = O + ((size_t)b * seqlen_q + row) * pitch + h * D + 2 * t;
#pragma unroll
            for (int j = 0; j < ND; ++j)
                *reinterpret_cast<unsigned*>(orow + 8 * j) =
                    pack_bf16x2(st.o[i][j][2 * hh] * inv, st.o[i][j][2 * hh + 1] * inv);
            if (t == 0)
                LSE[((size_t)b * heads + h) * seqlen_q + row] =
                    (st.m[i][hh] * scale_log2 + lg2(l)) * 0.6931471805599453f;
        }
    }
}
