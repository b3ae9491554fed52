// fa3_fwd_sm90a.cu: a FlashAttention-3-style warp-specialised forward kernel for sm_90a, the CUDA twin
// of gpusim's FA3 forward recipe (`gpusim_workloads::attention::fa3`, 16-bit, head dim 128,
// non-causal: tile 128 x 176, P from registers (MmaPV_is_RS), 2 consumer warpgroups in ping-pong,
// IntraWGOverlap, static persistent tile scheduler). Our own code: inline PTX, no CUTLASS, no headers.
//
//   O = softmax(Q K^T * scale) V, non-causal, head dim 128, bf16 in and out, fp32 accumulation;
//   also LSE = rowmax * scale + ln(rowsum) (fp32). Q, K, V, O are [batch][seqlen][heads][128] bf16
//   (bshd, row pitch heads * 128 elements); LSE is [batch][heads][seqlen_q] fp32.
//
// Launch configuration
//   grid   = dim3(min(tiles, number of SMs), 1, 1), tiles = (seqlen_q / 128) * heads * batch: CTA x runs
//            tiles x, x + gridDim.x, ... (FA3's StaticPersistentTileScheduler: m-block fastest, then
//            head, then batch). No cluster.
//   block  = dim3(384, 1, 1): warpgroup 0 is the producer (its warp 0 stays, one elected lane issues
//            the TMA loads; warps 1-3 only give their registers back), warpgroups 1 and 2 are the
//            consumers, each owning 64 query rows of the tile.
//   dynamic shared memory = SMEM_BYTES = 128 * 128 * 2 (Q) + 2 * 2 * 176 * 128 * 2 (2-stage K and V
//            rings) + 1024 (alignment for the 128-byte swizzle) + 128 (mbarriers) = 214 144 B: first
//            call cudaFuncSetAttribute(fa3_fwd_sm90a, cudaFuncAttributeMaxDynamicSharedMemorySize, 214144).
//   Kernel parameters (extern "C"):
//     fa3_fwd_sm90a(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
//                   const __grid_constant__ CUtensorMap tmap_v, bf16* O, float* LSE, int seqlen_q,
//                   int seqlen_k, int heads, int batch, float scale_log2), scale_log2 = scale * log2(e).
//     Tensor maps (cuTensorMapEncodeTiled, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank 5, elementStrides
//       all 1, INTERLEAVE_NONE, SWIZZLE_128B, L2_PROMOTION_L2_256B, FLOAT_OOB_FILL_NONE), each over
//       its [batch][seqlen][heads][128] tensor with head dim 128 split in two 64-element (128-byte)
//       halves, so that one TMA load brings a whole tile as [2 halves][rows][64], the layout the
//       128-byte-swizzled wgmma descriptors read (one UTMALDG per tile, as CUTLASS builds it):
//         globalDim     {64, seqlen, 2, heads, batch}
//         globalStrides {heads * 256, 128, 256, seqlen * heads * 256} (bytes, dims 1..4)
//         boxDim        {64, 128, 2, 1, 1} for tmap_q, {64, 176, 2, 1, 1} for tmap_k and tmap_v.
//   Requirements: seqlen_q % 128 == 0, seqlen_k % 176 == 0, seqlen_k >= 176; tensors 16-byte aligned.
//   Compile: NVRTC or nvcc with --gpu-architecture=sm_90a, -std=c++17.
//
// Structure, what the recipe must reproduce per KV block (FA3's mainloop with IntraWGOverlap):
//   producer, one elected lane of warp 0, per tile: K(0) (wait empty, arrive.expect_tx on full,
//     TMA), then the whole warp syncs on named barrier QueryEmpty (5, 288 threads) before Q's TMA,
//     then per block j = 1 .. n-1: K(j) and V(j-1), each: wait on the stage's empty mbarrier,
//     mbarrier.arrive.expect_tx (45 056 B) on its full mbarrier, one cp.async.bulk.tensor.5d; then
//     V(n-1). So per KV block: 2 SYNCS.PHASECHK (empty waits), 2 SYNCS.ARRIVE (expect_tx), 2 UTMALDG.
//   each consumer warpgroup, per block j >= 1: wait K(j) full; bar.sync own scheduler barrier
//     (2 + wg, 256 threads); wgmma.fence; 8 x wgmma.m64n176k16 S = Q K^T (SS); commit; wait V(j-1)
//     full; wgmma.fence; 11 x wgmma.m64n128k16 O += P V (RS: P from registers, V transposed);
//     commit; bar.arrive the other warpgroup's scheduler barrier (ping-pong); wgmma.wait_group 1
//     (S done); release K(j) (every consumer thread arrives: one SYNCS per warp); online softmax on
//     S (row max: FMNMX + 2 shfl.bfly per row; 2 ex2 rescales; 88 x (FFMA + MUFU.EX2) for P; row
//     sums) while the PV wgmma runs; wgmma.wait_group 0; release V(j-1); O *= rescale; P to bf16.
//     So per KV block and consumer warp: 19 HGMMA, 2 SYNCS.PHASECHK (full waits), 2 SYNCS.ARRIVE
//     (releases), 1 BAR.SYNC + 1 BAR.ARV, 90 MUFU.EX2.
//   Prologue of a tile: wait Q, the first QK^T and its softmax; epilogue: the last PV, bar.arrive
//   QueryEmpty, row sums across the quad, O / rowsum stored with 32-bit bf16x2 global stores from
//   the accumulators (FA3 goes through shared memory and a TMA store: not in the KV loop), LSE.
//   setmaxnreg: the producer warpgroup drops to 24 registers, the consumers rise to 240.
//
// Pipelines: the K and V rings have 2 stages each; block j of the CTA's running KV count c uses
// stage c & 1 with phase (c >> 1) & 1. Full barriers count 1 arrival (+ the TMA bytes), empty
// barriers 256 (every consumer thread); the producer's first wait on an empty stage passes at once
// (parity of the phase before the first).

#define D 128
#define BM 128
#define BN 176
#define THREADS 384
#define Q_BYTES (BM * D * 2)           // 32 768
#define KV_BYTES (BN * D * 2)          // 45 056
#define Q_HALF (BM * 128)              // one 64-column half of Q: 16 384 B
#define KV_HALF (BN * 128)             // one 64-column half of a K or V block: 22 528 B
#define SMEM_BYTES (Q_BYTES + 4 * KV_BYTES + 1024 + 128)
#define PRODUCER_REGS 24
#define CONSUMER_REGS 240
#define SCHED_BAR 2                    // + consumer warpgroup (0, 1)
#define QUERY_EMPTY_BAR 5
#define NS (BN / 2)                    // S accumulators per thread: 88
#define NO (D / 2)                     // O accumulators per thread: 64
#define NP (BN / 4)                    // packed P registers per thread: 44

static_assert(Q_HALF % 1024 == 0 && KV_HALF % 1024 == 0, "swizzle atoms stay 1024-byte aligned");

typedef unsigned short bf16_t;  // storage only

struct __align__(64) CUtensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---- mbarriers and named barriers ----------------------------------------------------------------

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
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
__device__ __forceinline__ void named_sync(unsigned id, unsigned threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(unsigned id, unsigned threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- TMA ----------------------------------------------------------------------------------------

// One tile: coordinates (d 0, row, half 0, head, batch) of a 5D map (see the header).
__device__ __forceinline__ void tma_load_tile(unsigned dst, const CUtensorMap* map, int row, int head, int batch,
                                              unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %2, %4, %5}], [%6];\n"
        :
        : "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(0), "r"(row), "r"(head), "r"(batch),
          "r"(bar)
        : "memory");
}

// ---- wgmma --------------------------------------------------------------------------------------

// Descriptor of a 128-byte-swizzled tile: start address, leading and stride byte offsets (>> 4).
// K-major (Q, K): rows of 64 bf16, 8-row groups 1024 B apart (SBO), LBO unused (1).
// MN-major (V as the transposed B of P V): 64-wide N chunks LBO apart, 8-row K groups 1024 B apart.
__device__ __forceinline__ unsigned long long make_desc(unsigned smem_addr, unsigned lbo) {
    unsigned long long d = 0;
    d |= (unsigned long long)((smem_addr & 0x3FFFF) >> 4);
    d |= (unsigned long long)(lbo >> 4) << 16;
    d |= (unsigned long long)(1024 >> 4) << 32;
    d |= (unsigned long long)1 << 62;
    return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_operand(unsigned& r) { asm volatile("" : "+r"(r)::"memory"); }

// S(64 x 176, fp32) = (ACCUM ? S : 0) + Q(64 x 16, smem) * K(176 x 16, smem)^T, both K-major.
template <int ACCUM>
__device__ __forceinline__ void wgmma_qk(float (&d)[88], unsigned long long desc_a, unsigned long long desc_b) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %90, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
        "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
        "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
        "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, "
        "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87"
        "}, %88, %89, p, 1, 1, 0, 0;\n"
        "}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
          "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
          "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),
          "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
          "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),
          "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
        : "l"(desc_a), "l"(desc_b), "n"(ACCUM)
        : "memory");
}

// O(64 x 128, fp32) += P(64 x 16, registers) * V(16 x 128, smem, MN-major: transposed B).
__device__ __forceinline__ void wgmma_pv(float (&d)[64], const unsigned* a, unsigned long long desc_b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
        "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
        "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
        "%56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
        "}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
          "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
          "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b)
        : "memory");
}

// ---- the kernel ---------------------------------------------------------------------------------

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
__device__ __forceinline__ float rcp(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// Shared-memory map of a CTA.
struct Smem {
    unsigned q, k, v;            // Q tile; K and V rings (2 x KV_BYTES each)
    unsigned q_full, k_full, k_empty, v_full, v_empty;  // mbarriers (K and V: 2 each)
};

// Online softmax of a block's S (rows g and g + 8 of the thread's warp: elements 4b + 2h + {0, 1}).
// Returns P (bf16 pairs) in `p`; with RESCALE, the rescale factors of the rows in `sc`.
template <bool RESCALE>
__device__ __forceinline__ void softmax(float (&s)[NS], float (&m)[2], float (&l)[2], float (&sc)[2],
                                        float scale_log2) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float mx = m[h];
#pragma unroll
        for (int b = 0; b < BN / 8; ++b) mx = fmaxf(mx, fmaxf(s[4 * b + 2 * h], s[4 * b + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        if (RESCALE) {
            sc[h] = ex2((m[h] - mx) * scale_log2);
            l[h] *= sc[h];
        }
        m[h] = mx;
        const float ms = mx * scale_log2;
#pragma unroll
        for (int b = 0; b < BN / 8; ++b) {
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                const float p = ex2(fmaf(s[4 * b + 2 * h + k], scale_log2, -ms));
                s[4 * b + 2 * h + k] = p;
                l[h] += p;
            }
        }
    }
}

__device__ __forceinline__ void convert_p(const float (&s)[NS], unsigned (&p)[NP]) {
#pragma unroll
    for (int i = 0; i < NP; ++i) p[i] = pack_bf16x2(s[2 * i], s[2 * i + 1]);
}

// S = Q K^T for consumer warpgroup `cw` on K stage `kst`: 8 wgmma, committed as one group.
__device__ __forceinline__ void gemm_qk(float (&s)[NS], const Smem& sm, int cw, int kst) {
#pragma unroll
    for (int i = 0; i < NS; ++i) fence_operand(s[i]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        // k-slice kk: half kk / 4 of the tile, 32 B further into its swizzled 128-byte rows per step.
        const unsigned a = sm.q + (kk / 4) * Q_HALF + cw * 64 * 128 + (kk % 4) * 32;
        const unsigned b = sm.k + kst * KV_BYTES + (kk / 4) * KV_HALF + (kk % 4) * 32;
        if (kk == 0)
            wgmma_qk<0>(s, make_desc(a, 16), make_desc(b, 16));
        else
            wgmma_qk<1>(s, make_desc(a, 16), make_desc(b, 16));
    }
    wgmma_commit();
}

// O += P V on V stage `vst`: 11 wgmma (k-slices of 16 keys), committed as one group.
__device__ __forceinline__ void gemm_pv(float (&o)[NO], unsigned (&p)[NP], const Smem& sm, int vst) {
#pragma unroll
    for (int i = 0; i < NO; ++i) fence_operand(o[i]);
#pragma unroll
    for (int i = 0; i < NP; ++i) fence_operand(p[i]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
        wgmma_pv(o, &p[4 * kk], make_desc(sm.v + vst * KV_BYTES + kk * 16 * 128, KV_HALF));
    wgmma_commit();
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    fa3_fwd_sm90a(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
                  const __grid_constant__ CUtensorMap tmap_v, bf16_t* __restrict__ O, float* __restrict__ LSE,
                  int seqlen_q, int seqlen_k, int heads, int batch, float scale_log2) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_u32(smem_raw) + 1023) & ~1023u;
    Smem sm;
    sm.q = base;
    sm.k = base + Q_BYTES;
    sm.v = sm.k + 2 * KV_BYTES;
    sm.q_full = sm.v + 2 * KV_BYTES;
    sm.k_full = sm.q_full + 8;
    sm.k_empty = sm.k_full + 16;
    sm.v_full = sm.k_empty + 16;
    sm.v_empty = sm.v_full + 16;

    const int warpgroup = threadIdx.x / 128;
    const int m_blocks = seqlen_q / BM;
    const int n_blocks = seqlen_k / BN;
    const int tiles = m_blocks * heads * batch;

    if (threadIdx.x == 0) {
        mbar_init(sm.q_full, 1);
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            mbar_init(sm.k_full + 8 * s, 1);
            mbar_init(sm.k_empty + 8 * s, 256);
            mbar_init(sm.v_full + 8 * s, 1);
            mbar_init(sm.v_empty + 8 * s, 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warpgroup == 0) {
        // ---- producer ----
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        if (threadIdx.x / 32 != 0) return;
        unsigned c = 0;  // running KV block count (both rings advance once per block)
#pragma unroll 1
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const int m_block = tile % m_blocks, head = (tile / m_blocks) % heads, b = tile / (m_blocks * heads);
            const bool leader = elect_one();
            if (leader) {
                const int s = c & 1;
                mbar_wait(sm.k_empty + 8 * s, ((c >> 1) & 1) ^ 1);
                mbar_arrive_expect_tx(sm.k_full + 8 * s, KV_BYTES);
                tma_load_tile(sm.k + s * KV_BYTES, &tmap_k, 0, head, b, sm.k_full + 8 * s);
            }
            // Q's buffer is free once both consumer warpgroups have arrived (at start and after a tile).
            named_sync(QUERY_EMPTY_BAR, 256 + 32);
            if (leader) {
                mbar_arrive_expect_tx(sm.q_full, Q_BYTES);
                tma_load_tile(sm.q, &tmap_q, m_block * BM, head, b, sm.q_full);
#pragma unroll 1
                for (int j = 1; j < n_blocks; ++j) {
                    const unsigned ck = c + j, cv = c + j - 1;
                    const int sk = ck & 1, sv = cv & 1;
                    mbar_wait(sm.k_empty + 8 * sk, ((ck >> 1) & 1) ^ 1);
                    mbar_arrive_expect_tx(sm.k_full + 8 * sk, KV_BYTES);
                    tma_load_tile(sm.k + sk * KV_BYTES, &tmap_k, j * BN, head, b, sm.k_full + 8 * sk);
                    mbar_wait(sm.v_empty + 8 * sv, ((cv >> 1) & 1) ^ 1);
                    mbar_arrive_expect_tx(sm.v_full + 8 * sv, KV_BYTES);
                    tma_load_tile(sm.v + sv * KV_BYTES, &tmap_v, (j - 1) * BN, head, b, sm.v_full + 8 * sv);
                }
                const unsigned cv = c + n_blocks - 1;
                const int sv = cv & 1;
                mbar_wait(sm.v_empty + 8 * sv, ((cv >> 1) & 1) ^ 1);
                mbar_arrive_expect_tx(sm.v_full + 8 * sv, KV_BYTES);
                tma_load_tile(sm.v + sv * KV_BYTES, &tmap_v, (n_blocks - 1) * BN, head, b, sm.v_full + 8 * sv);
            }
            __syncwarp();
            c += n_blocks;
        }
        return;
    }

    // ---- consumers ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
    const int cw = warpgroup - 1;  // rows [64 cw, 64 cw + 64) of the tile
    const int t128 = threadIdx.x % 128, w = t128 / 32, lane = t128 % 32;
    named_arrive(QUERY_EMPTY_BAR, 256 + 32);
    // Ping-pong: warpgroup 0 issues first; warpgroup 1 arrives at its barrier.
    if (cw == 1) named_arrive(SCHED_BAR + 0, 256);
    unsigned c = 0, tq = 0;
#pragma unroll 1
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, ++tq) {
        const int m_block = tile % m_blocks, head = (tile / m_blocks) % heads, b = tile / (m_blocks * heads);
        float s[NS], o[NO], m[2] = {-1e30f, -1e30f}, l[2] = {0.f, 0.f}, sc[2];
        unsigned p[NP];
#pragma unroll
        for (int i = 0; i < NO; ++i) o[i] = 0.f;

        // Prologue: Q, K(0), the first S and its softmax.
        mbar_wait(sm.q_full, tq & 1);
        mbar_wait(sm.k_full + 8 * (c & 1), (c >> 1) & 1);
        named_sync(SCHED_BAR + cw, 256);
        gemm_qk(s, sm, cw, c & 1);
        named_arrive(SCHED_BAR + (cw ^ 1), 256);
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < NS; ++i) fence_operand(s[i]);
        mbar_arrive(sm.k_empty + 8 * (c & 1));
        softmax<false>(s, m, l, sc, scale_log2);
        convert_p(s, p);

#pragma unroll 1
        for (int j = 1; j < n_blocks; ++j) {
            const unsigned ck = c + j, cv = c + j - 1;
            const int sk = ck & 1, sv = cv & 1;
            mbar_wait(sm.k_full + 8 * sk, (ck >> 1) & 1);
            named_sync(SCHED_BAR + cw, 256);
            gemm_qk(s, sm, cw, sk);
            mbar_wait(sm.v_full + 8 * sv, (cv >> 1) & 1);
            gemm_pv(o, p, sm, sv);
            named_arrive(SCHED_BAR + (cw ^ 1), 256);
            wgmma_wait<1>();  // S is done, P V still runs
#pragma unroll
            for (int i = 0; i < NS; ++i) fence_operand(s[i]);
            mbar_arrive(sm.k_empty + 8 * sk);
            softmax<true>(s, m, l, sc, scale_log2);
            wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < NO; ++i) fence_operand(o[i]);
            mbar_arrive(sm.v_empty + 8 * sv);
#pragma unroll
            for (int i = 0; i < NO; ++i) o[i] *= sc[(i >> 1) & 1];
            convert_p(s, p);
        }

        // The last P V.
        const unsigned cv = c + n_blocks - 1;
        mbar_wait(sm.v_full + 8 * (cv & 1), (cv >> 1) & 1);
        gemm_pv(o, p, sm, cv & 1);
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < NO; ++i) fence_operand(o[i]);
        mbar_arrive(sm.v_empty + 8 * (cv & 1));
        named_arrive(QUERY_EMPTY_BAR, 256 + 32);  // Q is no longer read
        c += n_blocks;

        // Epilogue: O fragment o[4 bc + 2 h + k] at row 16 w + g + 8 h, column 8 bc + 2 t + k.
        const int g = lane >> 2, t = lane & 3;
        const int pitch = heads * D;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float sum = l[h];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const float inv = rcp(sum);
            const int row = m_block * BM + cw * 64 + 16 * w + g + 8 * h;
            bf16_t* orow = O + ((size_t)b * seqlen_q + row) * pitch + head * D + 2 * t;
#pragma unroll
            for (int bc = 0; bc < D / 8; ++bc)
                *reinterpret_cast<unsigned*>(orow + 8 * bc) =
                    pack_bf16x2(o[4 * bc + 2 * h] * inv, o[4 * bc + 2 * h + 1] * inv);
            if (t == 0)
                LSE[((size_t)b * heads + head) * seqlen_q + row] = (m[h] * scale_log2 + lg2(sum)) * 0.6931471805599453f;
        }
    }
}
