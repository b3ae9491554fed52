// stream.cu: DRAM streaming and L2-resident read bandwidth (`gpusim measure`, bandwidth cases).
// Our own code, no headers. Arrays of float4 (16 B per thread per access: LDG.E.128 / STG.E.128).
//
// STREAM kernels, the shape of RRZE's gpu-stream that the simulator's `ubench::stream` models:
// a persistent grid-stride loop, launched with 1024-thread CTAs, 2 per SM. n4 = elements / 4.
//   stream_read:  sum += x[i]           (1 load;  bytes = 16 n4)
//   stream_write: a[i] = s              (1 store; "init"; bytes = 16 n4)
//   stream_copy:  a[i] = b[i]           (1 load, 1 store; bytes = 32 n4)
//   stream_triad: a[i] = b[i] + s c[i] + d[i]  (3 loads, 1 store, fmaf; bytes = 64 n4), the triad
//                 the simulator counts (3 loads + 1 store, as the RRZE cases' notes say)
// stream_read writes one partial sum per thread to `sums` (1 store per thread: negligible), so that
// the host can check what was read.
//
// l2_read: RRZE's gpu-l2-cache `sumKernel` shape, the simulator's `ubench::l2_read`: grid
// (block_run, reps), 1024 threads; CTA (x, y) reads float4 elements
// 1024 block_run k + 1024 x + threadIdx.x for k = 0..31 with ld.global.cg (LDG.E.128.STRONG.GPU,
// L2 only), so the data set is block_run * 512 KiB and every y re-reads it from the L2. The sum is
// stored only when it equals a value it never takes (RRZE's trick), except for y = 0 when
// `check` is set, which writes it to sums[1024 x + threadIdx.x].

typedef struct __align__(16) {
    float x, y, z, w;
} f4;

__device__ __forceinline__ float hsum(f4 v) { return (v.x + v.y) + (v.z + v.w); }

extern "C" __global__ void __launch_bounds__(1024) stream_read(const f4* __restrict__ x, unsigned long long n4,
                                                               float* __restrict__ sums) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.f;
    for (unsigned long long i = t; i < n4; i += stride) sum += hsum(x[i]);
    sums[t] = sum;
}

extern "C" __global__ void __launch_bounds__(1024) stream_write(f4* __restrict__ a, unsigned long long n4, float s) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    f4 v = {s, s, s, s};
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) a[i] = v;
}

extern "C" __global__ void __launch_bounds__(1024) stream_copy(f4* __restrict__ a, const f4* __restrict__ b,
                                                               unsigned long long n4) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) a[i] = b[i];
}

extern "C" __global__ void __launch_bounds__(1024) stream_triad(f4* __restrict__ a, const f4* __restrict__ b,
                                                                const f4* __restrict__ c, const f4* __restrict__ d,
                                                                unsigned long long n4, float s) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        f4 bv = b[i], cv = c[i], dv = d[i], r;
        r.x = __fadd_rn(__fmaf_rn(s, cv.x, bv.x), dv.x);
        r.y = __fadd_rn(__fmaf_rn(s, cv.y, bv.y), dv.y);
        r.z = __fadd_rn(__fmaf_rn(s, cv.z, bv.z), dv.z);
        r.w = __fadd_rn(__fmaf_rn(s, cv.w, bv.w), dv.w);
        a[i] = r;
    }
}

__device__ __forceinline__ f4 ld_cg(const f4* p) {
    f4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p));
    return v;
}

extern "C" __global__ void __launch_bounds__(1024) l2_read(const f4* __restrict__ x, float* __restrict__ sums,
                                                           unsigned check) {
    const unsigned block_run = gridDim.x;
    const f4* p = x + 1024ull * blockIdx.x + threadIdx.x;
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < 32; k++) sum += hsum(ld_cg(p + 1024ull * block_run * k));
    if ((check && blockIdx.y == 0) || sum == 1.2345e-30f) sums[1024 * blockIdx.x + threadIdx.x] = sum;
}
