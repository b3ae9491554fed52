// chase.cu: pointer-chase latency (`gpusim measure`, latency cases). Our own code, no headers.
//
// The chain: `elements` 8-byte slots `stride` bytes apart in a buffer of `elements * stride`
// bytes; slot i holds the address of slot next[i] (a single random cycle, built on the host with
// Sattolo's algorithm and written here by chase_init). One thread walks it: every step is one
// dependent 64-bit load whose address is the value the previous load returned, so the time per
// step is the load-to-use latency of the level the footprint lives in (L1, L2, DRAM). The loop is
// unrolled 16 times; the counter and branch are off the dependence chain.
//
// chase_ca: ld.global, default caching (LDG.E.64: weak, cached in L1; the path the simulator's
// chase models).
// chase_cg: ld.global.cg (LDG.E.64.STRONG.GPU: L2 only, whatever the footprint).
// Both walk `warm` steps first (untimed: fills the caches and TLBs), then 16 * `blocks16` steps
// between two clock64 reads; out[0] = cycles, out[1] = the final pointer (checked on the host against the
// position the permutation gives).

extern "C" __global__ void chase_init(unsigned long long base, const unsigned* next, unsigned long long elements,
                                      unsigned long long stride) {
    unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < elements; i += step) {
        *(unsigned long long*)(base + i * stride) = base + (unsigned long long)next[i] * stride;
    }
}

#define LOAD_ca(p) asm volatile("ld.global.u64 %0, [%0];" : "+l"(p)::"memory")
#define LOAD_cg(p) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p)::"memory")

#define CHASE_KERNEL(NAME, OP)                                                                              \
    extern "C" __global__ void NAME(unsigned long long start, unsigned warm, unsigned blocks16,                \
                                    unsigned long long* out) {                                              \
        unsigned long long p = start;                                                                       \
        _Pragma("unroll 1") for (unsigned i = 0; i < warm; i++) {                                           \
            LOAD_##OP(p);                                                                                    \
        }                                                                                                   \
        unsigned long long c0 = clock64();                                                                  \
        _Pragma("unroll 1") for (unsigned i = 0; i < blocks16; i++) {                                       \
            _Pragma("unroll") for (int j = 0; j < 16; j++) {                                                \
                LOAD_##OP(p);                                                                                \
            }                                                                                               \
        }                                                                                                   \
        unsigned long long c1 = clock64();                                                                  \
        out[0] = c1 - c0;                                                                                   \
        out[1] = p;                                                                                         \
    }

CHASE_KERNEL(chase_ca, ca)
CHASE_KERNEL(chase_cg, cg)
