// gemm_mma_sm80.cu: an Ampere-style multistage bf16 GEMM, the CUDA twin of gpusim's Ampere GEMM
// recipe (`gpusim_workloads::gemm::AmpereRecipe`). Our own code: inline PTX, no CUTLASS, no headers.
//
//   C[M][N] (bf16, row-major) = A[M][K] (bf16, row-major) * B[K][N] (bf16, row-major),
//   fp32 accumulation, rounded to bf16 (round to nearest even) on the way out.
//
// Launch configuration
//   grid   = dim3(N / BN, M / BM, 1) = dim3(N / 128, M / 128): CTA (x, y) computes C rows
//            [128 y, 128 y + 128) and columns [128 x, 128 x + 128).
//   block  = dim3(256, 1, 1): 8 warps, arranged 2 (M) x 4 (N), each computing a 64 x 32 warp tile.
//   dynamic shared memory = SMEM_BYTES = STAGES * (128 * 40 + 32 * 136) * 2 B
//            = 75 776 B for STAGES = 4 (above 48 KiB, so first call
//            cudaFuncSetAttribute(gemm_mma_sm80, cudaFuncAttributeMaxDynamicSharedMemorySize, 75776)
//            or cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 75776)).
//   Requirements: M % 128 == 0, N % 128 == 0, K % 32 == 0, K >= 32; A, B, C 16-byte aligned.
//   Compile: NVRTC or nvcc with --gpu-architecture=sm_80 (or any later sm_8x/sm_90), -std=c++17.
//   Kernel name (extern "C", not mangled): gemm_mma_sm80(A, B, C, M, N, K).
//
// Structure (per CTA), what the recipe must reproduce per k-iteration:
//   - prologue: load k-tiles 0 .. STAGES-2 with cp.async (one commit group each);
//   - main loop over the K / 32 k-tiles, kt:
//       cp.async.wait_group STAGES-2   (k-tile kt has landed, for this thread)
//       __syncthreads()                (... for every thread; and everyone is done with stage kt-1)
//       cp.async k-tile kt + STAGES-1 into the stage read in iteration kt-1 (predicated off past
//         the end), commit_group (always, so that the group count stays in step)
//       2 k-steps of 16: per warp 4 ldmatrix.x4 (A: 4 m16 x k16 fragments),
//         2 ldmatrix.x4.trans (B: 2 k16 x n16 fragments), 16 mma.sync m16n8k16
//     so per warp per k-tile: 4 LDGSTS.128 (2 for A, 2 for B: a 128 x 32 and a 32 x 128 bf16
//     tile are 512 16-byte chunks each, 2 per thread), 12 LDSM, 32 HMMA.16816.F32.BF16, 1 BAR.
//   - epilogue: cvt.rn.bf16x2.f32 and 32-bit global stores straight from the accumulators.
//
// Shared memory layout: per stage, A as [128][40] and B as [32][136] bf16: rows padded by 16 bytes
// so that the 8 row addresses of every ldmatrix 8x8 matrix fall in distinct bank groups
// (row pitch 80 B and 272 B), i.e. conflict-free without an XOR swizzle.

#ifndef STAGES
#define STAGES 4
#endif

#define BM 128
#define BN 128
#define BK 32
#define WARPS_M 2
#define WARPS_N 4
#define WM (BM / WARPS_M)  // 64
#define WN (BN / WARPS_N)  // 32
#define MT (WM / 16)       // 4 m16 tiles per warp
#define NT (WN / 8)        // 4 n8 tiles per warp
#define THREADS (32 * WARPS_M * WARPS_N)
#define A_PITCH (BK + 8)   // 40 bf16 = 80 B
#define B_PITCH (BN + 8)   // 136 bf16 = 272 B
#define A_STAGE (BM * A_PITCH)
#define B_STAGE (BK * B_PITCH)
#define SMEM_BYTES (STAGES * (A_STAGE + B_STAGE) * 2)

static_assert(STAGES >= 2, "the ring needs at least two stages");
static_assert((BM * BK / 8) % THREADS == 0 && (BK * BN / 8) % THREADS == 0, "whole chunks per thread");

typedef unsigned short bf16_t;  // storage only

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous copy global -> shared, L1 bypassed (.cg). With `pred` false it is not issued.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, bool pred) {
    asm volatile(
        "{\n"
        "  .reg .pred p;\n"
        "  setp.ne.b32 p, %2, 0;\n"
        "  @p cp.async.cg.shared.global [%0], [%1], 16;\n"
        "}\n"
        :
        : "r"(dst), "l"(src), "r"((int)pred)
        : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

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

// Two floats to a bf16x2 word, `lo` in the low half (round to nearest even).
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// Issues this thread's share of k-tile `kt` into ring stage `stage`: 2 chunks of A, 2 of B.
__device__ __forceinline__ void load_tile(const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* smem,
                                          int stage, int kt, int KT, int K, int N, int m0, int n0, int tid) {
    const bool pred = kt < KT;
    bf16_t* sa = smem + stage * (A_STAGE + B_STAGE);
    bf16_t* sb = sa + A_STAGE;
#pragma unroll
    for (int i = 0; i < (BM * BK / 8) / THREADS; ++i) {
        int c = tid + i * THREADS;  // chunk: 4 per 32-element row
        int row = c >> 2, col = (c & 3) * 8;
        cp_async_16(smem_u32(sa + row * A_PITCH + col), A + (size_t)(m0 + row) * K + (size_t)kt * BK + col, pred);
    }
#pragma unroll
    for (int i = 0; i < (BK * BN / 8) / THREADS; ++i) {
        int c = tid + i * THREADS;  // chunk: 16 per 128-element row
        int row = c >> 4, col = (c & 15) * 8;
        cp_async_16(smem_u32(sb + row * B_PITCH + col), B + ((size_t)kt * BK + row) * N + n0 + col, pred);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    gemm_mma_sm80(const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C, int M, int N,
                  int K) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16_t* smem = reinterpret_cast<bf16_t*>(smem_raw);

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wm = warp / WARPS_N;  // 0..1
    const int wn = warp % WARPS_N;  // 0..3
    const int m0 = blockIdx.y * BM;
    const int n0 = blockIdx.x * BN;
    const int KT = K / BK;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    // Prologue: k-tiles 0 .. STAGES-2.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        load_tile(A, B, smem, s, s, KT, K, N, m0, n0, tid);
        cp_async_commit();
    }

    // Per-lane ldmatrix offsets (in elements, within a stage).
    // A (x4): lanes 0-15 address rows 0-15 at k 0, lanes 16-31 rows 0-15 at k 8:
    //   matrices = {rows 0-7 k 0-7, rows 8-15 k 0-7, rows 0-7 k 8-15, rows 8-15 k 8-15} = a0..a3.
    const int a_off = (wm * WM + (lane & 15)) * A_PITCH + (lane >> 4) * 8;
    // B (x4.trans): lanes 0-15 address k rows 0-15 at n 0, lanes 16-31 k rows 0-15 at n 8:
    //   matrices = {k 0-7 n 0-7, k 8-15 n 0-7, k 0-7 n 8-15, k 8-15 n 8-15}
    //            = {b0, b1 of n-tile 0, b0, b1 of n-tile 1}.
    const int b_off = (lane & 15) * B_PITCH + wn * WN + (lane >> 4) * 8;

#pragma unroll 1
    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();

        // Refill the stage consumed in iteration kt-1 with k-tile kt + STAGES-1.
        load_tile(A, B, smem, (kt + STAGES - 1) % STAGES, kt + STAGES - 1, KT, K, N, m0, n0, tid);
        cp_async_commit();

        const bf16_t* sa = smem + (kt % STAGES) * (A_STAGE + B_STAGE);
        const bf16_t* sb = sa + A_STAGE;
        const unsigned sa_u = smem_u32(sa + a_off);
        const unsigned sb_u = smem_u32(sb + b_off);
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            unsigned af[MT][4];
            unsigned bfr[NT / 2][4];
#pragma unroll
            for (int i = 0; i < MT; ++i) ldmatrix_x4(af[i], sa_u + 2 * (i * 16 * A_PITCH + kk * 16));
#pragma unroll
            for (int j = 0; j < NT / 2; ++j) ldmatrix_x4_trans(bfr[j], sb_u + 2 * (kk * 16 * B_PITCH + j * 16));
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j)  // n-tile j: b0, b1 of the x4.trans load j / 2
                    mma_bf16_16816(acc[i][j], af[i], bfr[j / 2][(j & 1) * 2], bfr[j / 2][(j & 1) * 2 + 1]);
        }
    }
    cp_async_wait<0>();  // no copy may be in flight when the CTA exits (the tail groups are empty)

    // Epilogue: accumulator fragment of m16n8: c0, c1 at (row g, cols 2t, 2t+1), c2, c3 at row g+8,
    // with g = lane / 4, t = lane % 4.
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int row = m0 + wm * WM + i * 16 + g;
            const int col = n0 + wn * WN + j * 8 + 2 * t;
            *reinterpret_cast<unsigned*>(C + (size_t)row * N + col) = pack_bf16x2(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<unsigned*>(C + (size_t)(row + 8) * N + col) = pack_bf16x2(acc[i][j][2], acc[i][j][3]);
        }
    }
}
