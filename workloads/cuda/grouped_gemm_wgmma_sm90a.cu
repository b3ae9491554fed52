// grouped_gemm_wgmma_sm90a.cu: an M-grouped bf16 GEMM in the DeepGEMM style (contiguous layout, the
// expert GEMMs of a mixture-of-experts layer), warp-specialised TMA + mbarriers + wgmma: the CUDA twin
// of gpusim's grouped Hopper recipe (`gpusim_workloads::gemm::grouped::generate_grouped` with
// `gpusim_workloads::gemm::grouped_hopper_twin()`). Our own code: inline PTX, no CUTLASS, no headers;
// it is gemm_wgmma_sm90a.cu with a 128-column tile and the per-m-block expert lookup.
//
//   For every group (expert) g:  D_g = A_g * B_g^T, with
//   A[M][K] (bf16, row-major): the groups' rows one after another, each group's segment padded to a
//     multiple of 128 rows (DeepGEMM's contiguous m-alignment), so every 128-row m-block belongs to
//     one expert; a group with no rows has no m-block;
//   B[G * N][K] (bf16, row-major): expert g's N x K matrix at rows [g N, g N + N) (K-major, "NT");
//   C[M][N] (bf16, row-major): fp32 accumulation rounded to bf16 (round to nearest even).
//   block_expert[TM'] (int32): the expert of each m-block, -1 for an m-block that has no work.
//   The table is one entry per m-block (DeepGEMM's `grouped_layout` has one per row, read at the
//   m-block's first row: the same single load per tile); entries for the grid's padding m-blocks
//   (below) are -1. Padding rows inside a group's last m-block are computed in full, as DeepGEMM does
//   and as the recipe models (their A rows should be zero or their C rows ignored).
//
// Launch configuration (TM = M / 128 m-blocks)
//   grid   = dim3(GX, N / BN, ceil(TM / GX)) with GX = min(TM, 16) and BN = 128: CTA (x, y, z) computes
//            m-block mb = x + GX z (C rows [128 mb, 128 mb + 128)) and columns [128 y, 128 y + 128).
//            This is DeepGEMM's (and the recipe's) tile order: m fastest within groups of 16
//            m-blocks, then n, then the next 16 m-blocks. No cluster (1 x 1 x 1). block_expert must
//            hold GX * ceil(TM / GX) entries, -1 past TM.
//   block  = dim3(384, 1, 1): 3 warpgroups. Warpgroup 0 is the producer (one elected thread of its
//            first warp issues the TMA loads; the others only lower their register budget);
//            warpgroups 1 and 2 are consumers, each computing a 64 x 128 half of the CTA tile with
//            wgmma.m64n128k16 (64 fp32 accumulators per thread).
//   dynamic shared memory = SMEM_BYTES = STAGES * (128 * 64 + 128 * 64) * 2 + 1024 + 2 * STAGES * 8
//            = 132 160 B for STAGES = 4 (4 x 32 KiB ring, 1 KiB for aligning it to the 1024 B the
//            128-byte swizzle needs, the full and empty mbarriers). First call
//            cudaFuncSetAttribute(grouped_gemm_wgmma_sm90a, cudaFuncAttributeMaxDynamicSharedMemorySize, 132160)
//            or cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 132160).
//   Kernel parameters (extern "C", not mangled):
//     grouped_gemm_wgmma_sm90a(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
//                              bf16* C, const int* block_expert, int N, int K)
//     built on the host with cuTensorMapEncodeTiled (driver API), both with
//       dataType CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank 2, elementStrides {1, 1},
//       interleave CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle CU_TENSOR_MAP_SWIZZLE_128B,
//       l2Promotion CU_TENSOR_MAP_L2_PROMOTION_L2_256B, oobFill CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE:
//       tmap_a: globalAddress A, globalDim {K, M},     globalStrides {K * 2} (bytes), boxDim {64, 128}
//       tmap_b: globalAddress B, globalDim {K, G * N}, globalStrides {K * 2} (bytes), boxDim {64, 128}
//   Requirements: M % 128 == 0, N % 128 == 0, K % 64 == 0, K >= 64; A, B 16-byte aligned (TMA),
//   K * 2 a multiple of 16; C 4-byte aligned; every block_expert entry -1 or in [0, G).
//   Compile: NVRTC or nvcc with --gpu-architecture=sm_90a (wgmma and setmaxnreg need the "a"
//   target), -std=c++17.
//
// Why 128 x 128: it is the tile DeepGEMM's bf16 selection (the recipe's `grouped_recipe`) picks for
// the twin's reference problem, 8 experts x 256 rows, N 4096, K 7168 on H800 (the instruction-mix
// test asserts it); that selection never picks BLOCK_N = 256 (its candidates stop at 160). It also
// multicasts A over a 1 x 2 cluster there and picks 6 stages; the twin does neither (no cluster, 4
// stages), and its recipe is built with the twin's configuration.
//
// Structure, what the recipe must reproduce:
//   per tile (once per CTA): every warp loads its m-block's expert from block_expert (one LDG; the
//     recipe reads it as a per-CTA parameter, p0, from a table, at no instruction cost); the
//     barriers are initialised; a CTA whose expert is -1 exits (the recipe's idle m-block: barrier
//     set-up, then exit); the producer offsets B's row coordinate by expert * N (the recipe's B
//     address b + p0 * N * K * 2).
//   per k-iteration (one 64-deep k-tile), as in gemm_wgmma_sm90a.cu:
//   producer, one thread:  wait on empty[s] (parity of the previous round), arrive.expect_tx on
//     full[s] with 32 KiB, 2 TMA loads (A 128 x 64, B 128 x 64 of the expert) completing on full[s];
//   each consumer warpgroup: wait on full[s], wgmma.fence, 4 x wgmma.m64n128k16 (k 0, 16, 32, 48 of
//     the tile, through the swizzled smem descriptors), wgmma.commit_group, wgmma.wait_group 0,
//     then every consumer thread arrives on empty[s] (initialised with 256 arrivals).
//   setmaxnreg: the producer warpgroup drops to 40 registers per thread, the consumers rise to 232
//   (128 x 40 + 256 x 232 = 64 512 <= 65 536).
//   Epilogue: cvt.rn.bf16x2.f32 and 32-bit global stores straight from the accumulators.

#ifndef STAGES
#define STAGES 4
#endif

#define BM 128
#define BN 128
#define BK 64
#define WG_M 64                              // rows per consumer warpgroup
#define THREADS 384
#define A_TILE_BYTES (BM * BK * 2)           // 16 KiB
#define B_TILE_BYTES (BN * BK * 2)           // 16 KiB
#define STAGE_BYTES (A_TILE_BYTES + B_TILE_BYTES)
#define SMEM_BYTES (STAGES * STAGE_BYTES + 1024 + 2 * STAGES * 8)
#define PRODUCER_REGS 40
#define CONSUMER_REGS 232

static_assert(STAGES >= 2, "the ring needs at least two stages");
static_assert(BK * 2 == 128, "one k-tile row is one 128-byte swizzle row");

typedef unsigned short bf16_t;  // storage only

// The driver's opaque TMA descriptor (cuda.h: struct CUtensorMap_st { alignas(64) cuuint64_t opaque[16]; }).
struct __align__(64) CUtensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---- mbarriers ----------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Waits until the phase of parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{\n"
            "  .reg .pred p;\n"
            "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "  selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

// ---- TMA --------------------------------------------------------------------------------------

// 2D tiled TMA load of the box at (c0 = innermost, c1) into shared memory at `dst`; the bytes are
// counted on the barrier at `bar` (complete_tx).
__device__ __forceinline__ void tma_load_2d(unsigned dst, const CUtensorMap* map, int c0, int c1, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n"
        :
        : "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// ---- wgmma ------------------------------------------------------------------------------------

// Shared-memory matrix descriptor for a K-major tile written by TMA with the 128-byte swizzle:
// rows of 64 bf16 (128 B), 8-row core-matrix groups 1024 B apart (stride byte offset), leading
// byte offset unused by swizzled K-major layouts (1 by convention), layout type 1 = SWIZZLE_128B.
__device__ __forceinline__ unsigned long long make_desc_sw128(unsigned smem_addr) {
    unsigned long long d = 0;
    d |= (unsigned long long)((smem_addr & 0x3FFFF) >> 4);  // bits 0-13: start address >> 4
    d |= (unsigned long long)1 << 16;                        // bits 16-29: leading byte offset >> 4
    d |= (unsigned long long)(1024 >> 4) << 32;              // bits 32-45: stride byte offset >> 4
    d |= (unsigned long long)1 << 62;                        // bits 62-63: 128-byte swizzle
    return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator accesses across the asynchronous wgmma window.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// D(64 x 128, fp32) += A(64 x 16, smem) * B(16 x 128, smem), both K-major (no transposition).
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long desc_a,
                                                 unsigned long long desc_b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b)
        : "memory");
}

// ---- the kernel -------------------------------------------------------------------------------

__device__ __forceinline__ bool elect_one() {
    unsigned is_leader;
    asm volatile(
        "{\n"
        "  .reg .b32 r;\n"
        "  .reg .pred p;\n"
        "  elect.sync r|p, 0xffffffff;\n"
        "  selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(is_leader));
    return is_leader != 0;
}

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    grouped_gemm_wgmma_sm90a(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                             bf16_t* __restrict__ C, const int* __restrict__ block_expert, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    // The 128-byte swizzle pattern repeats every 1024 B: align the ring to that.
    const unsigned base = (smem_u32(smem_raw) + 1023) & ~1023u;
    const unsigned smem_a = base;                                // STAGES x [128][64] bf16
    const unsigned smem_b = base + STAGES * A_TILE_BYTES;        // STAGES x [128][64] bf16
    const unsigned full_bar = base + STAGES * STAGE_BYTES;       // STAGES x u64
    const unsigned empty_bar = full_bar + STAGES * 8;            // STAGES x u64

    const int warpgroup = threadIdx.x / 128;
    const int m_block = blockIdx.x + gridDim.x * blockIdx.z;
    const int m0 = m_block * BM;
    const int n0 = blockIdx.y * BN;
    const int KT = K / BK;
    // The tile's expert: one load per warp, issued before the barrier set-up so that its latency
    // overlaps it.
    const int expert = block_expert[m_block];

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full_bar + 8 * s, 1);        // the producer's arrive.expect_tx (+ TMA bytes)
            mbar_init(empty_bar + 8 * s, 256);     // every consumer thread
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    // An m-block of no group (the grid's padding, or a capacity with no rows): no work. The whole
    // CTA leaves, so no barrier is waited on.
    if (expert < 0) return;

    if (warpgroup == 0) {
        // ---- producer ----
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        if (threadIdx.x / 32 == 0 && elect_one()) {
            const int b_row = expert * N + n0;  // expert's B starts at row expert * N of [G * N, K]
#pragma unroll 1
            for (int kt = 0; kt < KT; ++kt) {
                const int s = kt % STAGES;
                const unsigned round = kt / STAGES;
                // Round 0 passes at once: parity 1 names the phase before the barrier's first.
                mbar_wait(empty_bar + 8 * s, (round & 1) ^ 1);
                mbar_arrive_expect_tx(full_bar + 8 * s, STAGE_BYTES);
                tma_load_2d(smem_a + s * A_TILE_BYTES, &tmap_a, kt * BK, m0, full_bar + 8 * s);
                tma_load_2d(smem_b + s * B_TILE_BYTES, &tmap_b, kt * BK, b_row, full_bar + 8 * s);
            }
        }
    } else {
        // ---- consumers ----
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
        const int cw = warpgroup - 1;  // 0 or 1: rows [64 cw, 64 cw + 64) of the CTA tile
        float d[64];
#pragma unroll
        for (int i = 0; i < 64; ++i) d[i] = 0.f;

#pragma unroll 1
        for (int kt = 0; kt < KT; ++kt) {
            const int s = kt % STAGES;
            const unsigned round = kt / STAGES;
            mbar_wait(full_bar + 8 * s, round & 1);
            const unsigned long long da = make_desc_sw128(smem_a + s * A_TILE_BYTES + cw * WG_M * BK * 2);
            const unsigned long long db = make_desc_sw128(smem_b + s * B_TILE_BYTES);
#pragma unroll
            for (int i = 0; i < 64; ++i) fence_operand(d[i]);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
                // k-slice kk starts 32 B into each swizzled 128 B row: +2 in the 16-byte address field.
                wgmma_m64n128k16(d, da + 2 * kk, db + 2 * kk);
            }
            wgmma_commit();
            wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < 64; ++i) fence_operand(d[i]);
            mbar_arrive(empty_bar + 8 * s);
        }

        // Epilogue. wgmma m64nN fp32 fragment: warp w of the warpgroup holds rows 16 w .. 16 w + 15;
        // per 8-column block b, d[4b], d[4b+1] sit at (row g, cols 8b + 2t, +1) and d[4b+2], d[4b+3]
        // at row g + 8, with g = lane / 4, t = lane % 4 (the mma.sync m16n8 layout, repeated).
        const int t128 = threadIdx.x % 128;
        const int w = t128 / 32, lane = t128 % 32;
        const int row = m0 + cw * WG_M + 16 * w + lane / 4;
        const int col = n0 + 2 * (lane % 4);
#pragma unroll
        for (int b = 0; b < BN / 8; ++b) {
            *reinterpret_cast<unsigned*>(C + (size_t)row * N + col + 8 * b) = pack_bf16x2(d[4 * b], d[4 * b + 1]);
            *reinterpret_cast<unsigned*>(C + (size_t)(row + 8) * N + col + 8 * b) =
                pack_bf16x2(d[4 * b + 2], d[4 * b + 3]);
        }
    }
}
