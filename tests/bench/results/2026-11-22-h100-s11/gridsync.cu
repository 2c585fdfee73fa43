// grid barrier cost: cooperative groups grid.sync() against a one-counter barrier, 2 x 132 blocks of 256 threads
#include <cooperative_groups.h>
#include <cstdio>
namespace cg = cooperative_groups;
struct bar_t { unsigned count, gen; unsigned pad[30]; unsigned cnt2[64][32]; };
__device__ __forceinline__ unsigned ld_acq(const unsigned *p)
{ unsigned v; asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v; }
__device__ __forceinline__ void my_sync(bar_t *b)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned g = ld_acq(&b->gen);
        __threadfence();
        if (atomicAdd(&b->count, 1u) == gridDim.x - 1) {
            b->count = 0;
            __threadfence();
            atomicExch(&b->gen, g + 1);
        } else {
            while (ld_acq(&b->gen) == g) {}
        }
        __threadfence();
    }
    __syncthreads();
}
// two-level: groups of G blocks arrive on their own counter; the group's last arrives on the top counter
__device__ __forceinline__ void my_sync2(bar_t *b, int G)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned g = ld_acq(&b->gen);
        __threadfence();
        int grp = blockIdx.x / G, ng = (gridDim.x + G - 1) / G;
        int sz = min(G, (int)gridDim.x - grp * G);
        bool last = false;
        if (atomicAdd(&b->cnt2[grp][0], 1u) == (unsigned)sz - 1) {
            b->cnt2[grp][0] = 0;
            if (atomicAdd(&b->count, 1u) == (unsigned)ng - 1) { b->count = 0; last = true; }
        }
        if (last) { __threadfence(); atomicExch(&b->gen, g + 1); }
        else while (ld_acq(&b->gen) == g) {}
        __threadfence();
    }
    __syncthreads();
}
__global__ void k(int mode, int n, bar_t *b, int *x)
{
    cg::grid_group grid = cg::this_grid();
    for (int i = 0; i < n; i++) {
        if (threadIdx.x == 0) atomicAdd(x + (blockIdx.x + i) % gridDim.x, 1);
        if (mode == 0) grid.sync(); else if (mode == 1) my_sync(b); else my_sync2(b, mode);
    }
}
int main()
{
    int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    bar_t *b; int *x; cudaMalloc(&b, sizeof(bar_t)); cudaMalloc(&x, 4096 * 4);
    cudaMemset(b, 0, sizeof(bar_t)); cudaMemset(x, 0, 4096 * 4);
    for (int per = 1; per <= 2; per++)
    for (int mode : {0, 1, 8, 16, 33}) {
        int n = 20000, blocks = per * sms;
        void *args[] = {&mode, &n, &b, &x};
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
        float best = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            cudaEventRecord(e0);
            cudaError_t err = cudaLaunchCooperativeKernel((void *)k, blocks, 256, args, 0, 0);
            cudaEventRecord(e1); cudaEventSynchronize(e1);
            if (err != cudaSuccess) { printf("err %s\n", cudaGetErrorString(err)); return 1; }
            float ms; cudaEventElapsedTime(&ms, e0, e1); best = ms < best ? ms : best;
        }
        printf("blocks %d mode %d (0 cg, 1 one counter, >1 groups of that many): %.3f us per barrier\n", blocks, mode, best * 1e3 / n);
    }
    printf("check %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
