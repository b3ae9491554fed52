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
