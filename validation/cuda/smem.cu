// smem.cu: shared-memory load bandwidth and bank conflicts (`gpusim measure`). Our own code, no
// headers.
//
// smem_lds: every thread reads 32-bit words from shared memory at word (lane * stride + 32 j) for
// j = 0..15, `iters` times: the 32 lanes of a warp touch banks (lane * stride) mod 32, so stride 1
// is conflict-free and stride 2^c is a 2^c-way bank conflict (32: all lanes in bank 0). The 16
// offsets are immediates of the LDS; the loads are volatile, so none is hoisted out of the loop.
// The table is filled with mix32(i) (STS) first; out[thread] = the wrapping sum of what the thread
// read, which the host checks.

__device__ __forceinline__ unsigned mix32(unsigned x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

#define SMEM_WORDS 1536  // 31 * 32 + 15 * 32 + 1 = 1473 words at most are read

extern "C" __global__ void __launch_bounds__(1024) smem_lds(unsigned* __restrict__ out, unsigned iters, unsigned stride) {
    __shared__ unsigned table[SMEM_WORDS];
    for (unsigned i = threadIdx.x; i < SMEM_WORDS; i += blockDim.x) table[i] = mix32(i);
    __syncthreads();
    const volatile unsigned* v = table + ((threadIdx.x & 31) * stride) % 1024;
    unsigned acc = 0;
#pragma unroll 1
    for (unsigned it = 0; it < iters; it++) {
#pragma unroll
        for (int j = 0; j < 16; j++) acc += v[32 * j];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
