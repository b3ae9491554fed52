// wgmma.cu: Hopper warpgroup MMA throughput (`gpusim measure`, peak cases). sm_90a only: wgmma
// needs the "a" target. Our own code, inline PTX, no headers.
//
// wgmma_tput_bf16(out, iters, ones, cycles): 256-thread CTAs (2 warpgroups), 48 KiB of dynamic
// shared memory (launch with shared_mem_bytes = 49152, no attribute needed). Thread 0.. fill a
// 64 x 64 A tile and a 256 x 64 B tile (bf16, K-major, 128-byte swizzle as TMA would write them)
// with ones (`ones` set) or random bf16 values; both warpgroups then run `iters` iterations of
// wgmma.fence, 4 x wgmma.mma_async.m64n256k16.f32.bf16.bf16 (k 0, 16, 32, 48 of the tile; one
// HGMMA.64x256x16.F32.BF16 each, 2 * 64 * 256 * 16 = 524 288 FLOP), commit_group, wait_group 1
// (one batch stays in flight; wait_group 0 after the loop), into 128 fp32 accumulators per thread. Thread 0 of the CTA records the clock64 cycles between
// two __syncthreads around the loop in cycles[blockIdx.x]: FLOP per clock per SM = CTA FLOPs /
// cycles when one CTA runs per SM (grid = number of SMs). With ones every accumulator ends at
// 4 * 16 * iters, which the host checks; out[thread] = the sum of its 128 accumulators.
//
// The descriptors and the wgmma wrapper are those of workloads/cuda/gemm_wgmma_sm90a.cu.

typedef unsigned short bf16_t;

__device__ __forceinline__ unsigned mix32(unsigned x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

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
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// D(64 x 256, fp32) += A(64 x 16, smem) * B(16 x 256, smem), both K-major (no transposition).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long desc_a,
                                                 unsigned long long desc_b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
        "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, "
        "%39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "
        "%58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, "
        "%77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "
        "%127}, "
        "%128, %129, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
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
          "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
          "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),
          "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
          "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),
          "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),
          "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]),
          "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b)
        : "memory");
}

// The timed loop of both kernels: `iters` iterations of 4 wgmma.m64n256k16 (k 0, 16, 32, 48
// of the tiles at `da`, `db`) into `d`, one batch left in flight as CUTLASS's mainloop does.
__device__ __forceinline__ void wgmma_loop(float (&d)[128], unsigned long long da, unsigned long long db,
                                           unsigned iters) {
#pragma unroll 1
    for (unsigned it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < 128; ++i) fence_operand(d[i]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) wgmma_m64n256k16(d, da + 2 * kk, db + 2 * kk);
        wgmma_commit();
        wgmma_wait1();
    }
    wgmma_wait0();
#pragma unroll
    for (int i = 0; i < 128; ++i) fence_operand(d[i]);
}

#define A_BYTES (64 * 64 * 2)
#define B_BYTES (256 * 64 * 2)

extern "C" __global__ void __launch_bounds__(256, 1)
    wgmma_tput_bf16(float* out, unsigned iters, unsigned ones, unsigned long long* cycles) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_u32(smem_raw) + 1023) & ~1023u;  // 47 KiB used of 48
    unsigned char* gbase = smem_raw + (base - smem_u32(smem_raw));
    bf16_t* tile = reinterpret_cast<bf16_t*>(gbase);
    for (unsigned i = threadIdx.x; i < (A_BYTES + B_BYTES) / 2; i += blockDim.x) {
        unsigned short v = 0x3F80;  // bf16 1.0
        if (!ones) {
            float f = (float)(mix32(i * 2654435761u + blockIdx.x) >> 8) * (1.0f / 8388608.0f) - 1.0f;
            asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(v) : "f"(f));
        }
        tile[i] = v;
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes, async-proxy reads
    __syncthreads();

    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    const unsigned long long da = make_desc_sw128(base);
    const unsigned long long db = make_desc_sw128(base + A_BYTES);

    __syncthreads();
    const unsigned long long c0 = clock64();
    wgmma_loop(d, da, db, iters);
    __syncthreads();
    const unsigned long long c1 = clock64();
    if (threadIdx.x == 0) cycles[blockIdx.x] = c1 - c0;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 128; ++i) s += d[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// wgmma_mufu_overlap(out, iters, ex2_iters, mode, cycles): do MUFU.EX2 and a wgmma chain overlap
// on one SM? FlashAttention-3's softmax (one MUFU.EX2 per score element, 16 per clock per SM)
// runs beside its wgmma chain; at head dim 64 both need 1/16 clock per element, so whether the
// two units work at once decides the kernel's speed. 384-thread CTAs (3 warpgroups), 48 KiB of
// dynamic shared memory. Warpgroups 0 and 1 run wgmma_tput_bf16's loop (`iters` iterations of
// 4 wgmma.m64n256k16) when `mode` has bit 0; warpgroup 2 runs `ex2_iters` iterations of 16
// independent ex2.approx.ftz.f32 per thread (x = 2^-x, which stays in [0.5, 1]: one MUFU.EX2
// with a negated operand each) when `mode` has bit 1. Each role times its own loop from the
// same __syncthreads: cycles[3 * blockIdx.x + 0] = warpgroup 0's wgmma loop,
// cycles[3 * blockIdx.x + 1] = warpgroup 2's ex2 loop, cycles[3 * blockIdx.x + 2] = the whole
// (both loops and the closing __syncthreads). mode 1: wgmma alone, 2: ex2 alone, 3: both.
// out[thread] = a sum of the thread's registers (keeps the loops live).
extern "C" __global__ void __launch_bounds__(384, 1)
    wgmma_mufu_overlap(float* out, unsigned iters, unsigned ex2_iters, unsigned mode, unsigned long long* cycles) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_u32(smem_raw) + 1023) & ~1023u;
    unsigned char* gbase = smem_raw + (base - smem_u32(smem_raw));
    bf16_t* tile = reinterpret_cast<bf16_t*>(gbase);
    for (unsigned i = threadIdx.x; i < (A_BYTES + B_BYTES) / 2; i += blockDim.x) {
        float f = (float)(mix32(i * 2654435761u + blockIdx.x) >> 8) * (1.0f / 8388608.0f) - 1.0f;
        unsigned short v;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(v) : "f"(f));
        tile[i] = v;
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    const unsigned wg = threadIdx.x / 128;
    float s = 0.f;
    __syncthreads();
    const unsigned long long c0 = clock64();
    if (wg < 2) {
        if (mode & 1) {
            float d[128];
#pragma unroll
            for (int i = 0; i < 128; ++i) d[i] = 0.f;
            const unsigned long long da = make_desc_sw128(base);
            const unsigned long long db = make_desc_sw128(base + A_BYTES);
            wgmma_loop(d, da, db, iters);
#pragma unroll
            for (int i = 0; i < 128; ++i) s += d[i];
            if (threadIdx.x == 0) cycles[3 * blockIdx.x] = clock64() - c0;
        }
    } else if (mode & 2) {
        float x[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) x[i] = 0.5f + (float)((threadIdx.x * 16 + i) & 255) * (1.0f / 512.0f);
#pragma unroll 1
        for (unsigned it = 0; it < ex2_iters; ++it) {
#pragma unroll
            for (int i = 0; i < 16; ++i) asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(x[i]) : "f"(-x[i]));
        }
#pragma unroll
        for (int i = 0; i < 16; ++i) s += x[i];
        if (threadIdx.x == 256) cycles[3 * blockIdx.x + 1] = clock64() - c0;
    }
    __syncthreads();
    if (threadIdx.x == 0) cycles[3 * blockIdx.x + 2] = clock64() - c0;
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
