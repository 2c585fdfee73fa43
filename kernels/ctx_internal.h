/* ctx_internal: the context's private layout and scratch pool, shared by the dispatch layer and the backends. */
#ifndef MK_CTX_INTERNAL_H
#define MK_CTX_INTERNAL_H

#include "ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch slots: each op that keeps device state between calls owns one. A slot lives in the context's memory,
 * except the *_HOST slots: host memory, page-locked on CUDA contexts (the target of asynchronous copies). */
typedef enum {
    MK_SCRATCH_OTSU = 0,   /* histogram, block counter and chosen threshold of the CUDA Otsu */
    MK_SCRATCH_GUIDED,     /* the guided filter's coefficients and, for large radii, its summed-area tables */
    MK_SCRATCH_YOLO,       /* boxes, per-class lists and results of the CUDA decode + NMS */
    MK_SCRATCH_YOLO_HOST,  /* pinned host memory the CUDA decode + NMS copies its results to */
    MK_SCRATCH_MAXFLOW,    /* the solver buffer of mk_maxflow_grid_cuda (maxflow_cuda.h) */
    MK_SCRATCH_GRABCUT,    /* the CUDA GrabCut's state, per-pixel labels, partial sums and its max-flow solver */
    MK_SCRATCH_GRABCUT_HOST, /* pinned host memory the CUDA GrabCut copies its status, model and energy to */
    MK_SCRATCH_BLUR,       /* the CUDA blur's two intermediate images (composite_cuda.cu) */
    MK_SCRATCH_COUNT
} mk_scratch_slot_t;

struct mk_ctx {
    mk_backend_t backend;
    int device;          /* CUDA device ordinal */
    void *stream;        /* cudaStream_t */
    int sm_count;
    char device_name[160];
    struct {
        void *ptr;
        size_t bytes;
        int dirty;       /* contents unknown after a failed launch: zero again before use */
        unsigned long long tag; /* the last user's description of what it left (0 after zeroing) */
    } scratch[MK_SCRATCH_COUNT];
};

/* The slot's buffer of at least `bytes` in the slot's memory. It is zero-filled when it is (re)allocated or
 * was marked dirty; `fresh` (may be NULL) then says so. Otherwise it holds what the last user left. */
int mk_ctx_scratch(mk_ctx_t *ctx, mk_scratch_slot_t slot, size_t bytes, void **ptr, int *fresh);
void mk_ctx_scratch_dirty(mk_ctx_t *ctx, mk_scratch_slot_t slot);

#ifdef __cplusplus
}
#endif
#endif
