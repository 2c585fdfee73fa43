/* grid_barrier.cuh: a barrier across the blocks of a cooperative launch (every thread of every block calls it), for
 * maxflow_cuda.cu and grabcut_cuda.cu.
 *
 * Cooperative groups' grid.sync() arrives the same way (thread 0 of each block: a fence, then one atomic add on a
 * word whose top bit flips once every block has arrived: block 0 adds 2^31 - (blocks - 1), the others 1), but it
 * waits with acquire loads, each an L2 round trip followed by an invalidation of the SM's whole L1 (CCTL.IVALL): about
 * a million of them in one 640x480 max-flow, while the other block on the SM may still be working (ncu, NOTES.md,
 * session 21). Here thread 0 polls with relaxed loads and one fence follows the flip: 1280x720 GrabCut 8-10 % faster
 * on the H100 (max-flow kernels), the same results.
 *
 * The word's low 31 bits must be 0 when a launch starts (the caller clears it once, before its first launch); each
 * barrier adds 2^31 in all, so they are 0 again after every launch. Kernels that use it read the state other blocks
 * wrote through L2 (__ldcg, atomics), as they did with grid.sync(). */
#ifndef MK_GRID_BARRIER_CUH
#define MK_GRID_BARRIER_CUH

__device__ __forceinline__ void mk_grid_barrier(unsigned *bar)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned nb = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
        __threadfence();
        const unsigned old = atomicAdd(bar, nb);
        unsigned cur;
        do {
            asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(bar) : "memory");
        } while (((old ^ cur) & 0x80000000u) == 0);
        __threadfence();
    }
    __syncthreads();
}

#endif
