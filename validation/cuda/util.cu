// util.cu: helpers of the measurement harness (`gpusim measure`): random fills and the SM clock.
// Our own code, no headers; compiled at run time with NVRTC for the device's sm_XX.
//
// The fills are deterministic: element i of a fill with seed s is a function of (i, s) only
// (`mix32` below), which validation/src/measure/host.rs reproduces bit for bit, so that results
// can be checked on the host without copying the inputs back.

typedef unsigned short u16;

// A 32-bit integer hash (the "lowbias32" finaliser): a bijection with good avalanche.
__device__ __forceinline__ unsigned mix32(unsigned x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

// Uniform in [-1, 1) with 24 random bits: exact in fp32, never zero-filled memory.
__device__ __forceinline__ float uniform(unsigned long long i, unsigned seed) {
    unsigned h = mix32((unsigned)i ^ mix32(seed ^ (unsigned)(i >> 32) * 0x9e3779b9U));
    return (float)(h >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

extern "C" __global__ void fill_f32(float* p, unsigned long long n, unsigned seed) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        p[i] = uniform(i, seed);
    }
}

// bf16 (round to nearest even) of uniform(i, seed).
extern "C" __global__ void fill_bf16(u16* p, unsigned long long n, unsigned seed) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned short r;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(uniform(i, seed)));
        p[i] = r;
    }
}

// fp16 (round to nearest even) of uniform(i, seed).
extern "C" __global__ void fill_f16(u16* p, unsigned long long n, unsigned seed) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned short r;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(uniform(i, seed)));
        p[i] = r;
    }
}

// fp8 e4m3 (round to nearest even, saturated to +-448) of uniform(i, seed), for the cuBLASLt fp8
// GEMMs. The conversion instruction exists from sm_89 on; for older targets this file still has to
// compile (util.cu is built for every device), so there the kernel only traps: the harness never
// launches it below compute capability 8.9 (validation/src/measure/gemm_fp8.rs checks first).
extern "C" __global__ void fill_e4m3(unsigned char* p, unsigned long long n, unsigned seed) {
#if __CUDA_ARCH__ >= 890
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned short r;
        // Two f32 in, two e4m3 out: the second operand goes to the low byte, which is the one kept.
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(uniform(i, seed)));
        p[i] = (unsigned char)(r & 0xff);
    }
#else
    __trap();
#endif
}

// The SM clock: one thread per CTA spins for `spin_ns` of the global timer (nanoseconds) and
// records how many SM clock cycles (clock64) that took. out[2 b] = cycles, out[2 b + 1] = ns.
extern "C" __global__ void sm_clock(unsigned long long* out, unsigned long long spin_ns) {
    if (threadIdx.x != 0) return;
    unsigned long long t0, t1, c0, c1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    c0 = clock64();
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    } while (t1 - t0 < spin_ns);
    c1 = clock64();
    out[2 * blockIdx.x] = c1 - c0;
    out[2 * blockIdx.x + 1] = t1 - t0;
}
