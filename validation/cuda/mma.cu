// mma.cu: mma.sync throughput and latency per data type (`gpusim measure`, peak and latency
// cases). Our own code, inline PTX, no headers; sm_80 and newer.
//
//   type   instruction                                          FLOP per warp-instruction  SASS
//   f16    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32    4096                       HMMA.16816.F32
//   bf16   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32  4096                       HMMA.16816.F32.BF16
//   tf32   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32   2048                       HMMA.1688.F32.TF32
//   s8     mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32      8192 (integer ops)         IMMA.16832.S8.S8
//
// mma_tput_<t>(out, iters, ones, cycles): every warp keeps CHAINS independent accumulators and
// issues CHAINS MMAs per iteration; thread 0 of each CTA records the clock64 cycles between two
// __syncthreads around the loop in cycles[blockIdx.x], so FLOP per clock per SM = CTA FLOPs /
// cycles when one CTA runs per SM (launch grid = number of SMs).
// mma_lat_<t>(out, iters, ones, cycles): one warp, one accumulator: a dependent chain of `iters`
// MMAs (unrolled by 16); cycles[0] = clock64 cycles of the chain.
// Operands: with `ones` every A and B element is 1 (then every accumulator ends at
// iters * K per chain: the host checks that); otherwise random values from mix32 (the timed runs:
// tensor-core power, and so clocks, depend on the data). out[thread] = the sum of its accumulators.

#define CHAINS 8

__device__ __forceinline__ unsigned mix32(unsigned x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

__device__ __forceinline__ float unit(unsigned h) { return (float)(h >> 8) * (1.0f / 8388608.0f) - 1.0f; }

__device__ __forceinline__ unsigned rnd_f16(unsigned h) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(unit(mix32(h))), "f"(unit(h)));
    return r;
}
__device__ __forceinline__ unsigned rnd_bf16(unsigned h) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(unit(mix32(h))), "f"(unit(h)));
    return r;
}
__device__ __forceinline__ unsigned rnd_tf32(unsigned h) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(unit(h)));
    return r;
}
__device__ __forceinline__ unsigned rnd_s8(unsigned h) { return h; }

#define ONE_f16 0x3C003C00u
#define ONE_bf16 0x3F803F80u
#define ONE_tf32 0x3F800000u
#define ONE_s8 0x01010101u

// One MMA, D = A B + D, per type; acc is 4 registers (f32 or s32).
#define MMA_f16(acc, a, b)                                                                          \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
                 "{%0,%1,%2,%3};"                                                                   \
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#define MMA_bf16(acc, a, b)                                                                           \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
                 "{%0,%1,%2,%3};"                                                                     \
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])                             \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#define MMA_tf32(acc, a, b)                                                                           \
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
                 "{%0,%1,%2,%3};"                                                                     \
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])                             \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#define MMA_s8(acc, a, b)                                                                            \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
                 "{%0,%1,%2,%3};"                                                                    \
                 : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))

#define MMA_KERNELS(T, ACC)                                                                              \
    extern "C" __global__ void __launch_bounds__(512) mma_tput_##T(float* out, unsigned iters, unsigned ones, \
                                                                  unsigned long long* cycles) {          \
        const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;                                     \
        unsigned a[4], b[2];                                                                            \
        _Pragma("unroll") for (int i = 0; i < 4; i++) a[i] = ones ? ONE_##T : rnd_##T(tid * 8 + i);     \
        _Pragma("unroll") for (int i = 0; i < 2; i++) b[i] = ones ? ONE_##T : rnd_##T(tid * 8 + 4 + i); \
        ACC acc[CHAINS][4];                                                                             \
        _Pragma("unroll") for (int c = 0; c < CHAINS; c++) _Pragma("unroll") for (int i = 0; i < 4; i++) acc[c][i] = 0; \
        __syncthreads();                                                                                \
        unsigned long long c0 = clock64();                                                              \
        _Pragma("unroll 1") for (unsigned it = 0; it < iters; it++) {                                   \
            _Pragma("unroll") for (int c = 0; c < CHAINS; c++) { MMA_##T(acc[c], a, b); }             \
        }                                                                                               \
        __syncthreads();                                                                                \
        unsigned long long c1 = clock64();                                                              \
        if (threadIdx.x == 0) cycles[blockIdx.x] = c1 - c0;                                             \
        float s = 0.f;                                                                                  \
        _Pragma("unroll") for (int c = 0; c < CHAINS; c++) _Pragma("unroll") for (int i = 0; i < 4; i++) s += (float)acc[c][i]; \
        out[tid] = s;                                                                                   \
    }                                                                                                   \
    extern "C" __global__ void mma_lat_##T(float* out, unsigned iters, unsigned ones, unsigned long long* cycles) { \
        const unsigned tid = threadIdx.x;                                                               \
        unsigned a[4], b[2];                                                                            \
        _Pragma("unroll") for (int i = 0; i < 4; i++) a[i] = ones ? ONE_##T : rnd_##T(tid * 8 + i);     \
        _Pragma("unroll") for (int i = 0; i < 2; i++) b[i] = ones ? ONE_##T : rnd_##T(tid * 8 + 4 + i); \
        ACC acc[4] = {0, 0, 0, 0};                                                                      \
        __syncwarp();                                                                                   \
        unsigned long long c0 = clock64();                                                              \
        _Pragma("unroll 1") for (unsigned it = 0; it < iters; it += 16) {                               \
            _Pragma("unroll") for (int j = 0; j < 16; j++) { MMA_##T(acc, a, b); }                     \
        }                                                                                               \
        unsigned long long c1 = clock64();                                                              \
        if (threadIdx.x == 0) cycles[0] = c1 - c0;                                                      \
        out[tid] = (float)acc[0] + (float)acc[1] + (float)acc[2] + (float)acc[3];                       \
    }

MMA_KERNELS(f16, float)
MMA_KERNELS(bf16, float)
MMA_KERNELS(tf32, float)
MMA_KERNELS(s8, int)
