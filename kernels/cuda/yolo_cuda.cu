/* yolo_cuda: decode + NMS on the device: three launches, one copy of the results back, one wait.
 *
 *  decode_kernel  one thread per box (cell x anchor of every layer, reading Darknet's planes coalesced): a box
 *                 with objectness > thresh stores its NMS-frame and output boxes at its Darknet index, and appends
 *                 one sort key per class above the threshold to that class's list (atomic counter per class; a
 *                 list holds at most one key per box, so its length is bounded by the number of boxes).
 *  class_kernel   one block per class: sorts the class's keys (bitonic) and runs Darknet's greedy suppression in
 *                 key order with a shared bitmask of removed entries (one pass per surviving box, all threads
 *                 testing the later ones), then packs the survivors, still in order, at the front of the list.
 *                 When the list fits in shared memory the keys are sorted there and the boxes gathered there in
 *                 sorted order; a longer list is sorted in place in global memory and reads its boxes by index.
 *  output_kernel  ranks every survivor among all classes (its place in its own list plus a binary search in each
 *                 other list), writes the first max_out of them as mk_detection_t and their count.
 * The keys make the order total (probability, then index), so the result does not depend on the order in which
 * the atomics append; the arithmetic is yolo_px.h's, so it equals the CPU reference bit for bit. */
#include "backend.h"
#include "cuda_check.h"
#include "yolo_px.h"

#include <string.h>

namespace {

const int kDecodeThreads = 256, kClassThreads = 1024, kOutThreads = 256;
/* Dynamic shared memory a block may use without opting in. */
const int kSmemDefault = 48 * 1024;
/* Shared bytes per list entry the class kernel can hold: its key and its box. */
const int kEntryBytes = (int)(sizeof(uint64_t) + sizeof(float4));

static_assert(sizeof(mk_detection_t) == 32, "mk_detection_t is copied as 32-byte records");

struct dev_layer {
    const float *data;
    int w, h, n, classes;
    int base; /* Darknet index of the layer's first box */
    float anchors[2 * MK_YOLO_MAX_ANCHORS];
};

struct decode_args {
    dev_layer l[MK_YOLO_MAX_LAYERS];
    int nlayers, boxes;
    int c0, ncls; /* the classes decoded: c0 .. c0 + ncls - 1 */
    float thresh;
    mk_letterbox_t lb;
};

struct out_header {
    int n;
    int pad[3];
};

/* Byte offsets of the device scratch. */
struct layout {
    size_t nbox, obox, obj, keys, cnt, nkept, out, total;
};

layout plan_layout(int boxes, int ncls, int max_out)
{
    layout s;
    size_t off = 0, a = (size_t)boxes;
    s.nbox = off;
    off += a * sizeof(float4);
    s.obox = off;
    off += a * sizeof(float4);
    s.obj = off;
    off += (a * sizeof(float) + 15) / 16 * 16;
    s.keys = off;
    off += (size_t)ncls * a * sizeof(uint64_t);
    s.cnt = off;
    off += (size_t)ncls * sizeof(int);
    s.nkept = off;
    off += ((size_t)ncls * sizeof(int) + 15) / 16 * 16;
    s.out = off;
    off += sizeof(out_header) + (size_t)max_out * sizeof(mk_detection_t);
    s.total = off;
    return s;
}

__global__ void __launch_bounds__(kDecodeThreads)
    decode_kernel(const __grid_constant__ decode_args args, float4 *__restrict__ nbox, float4 *__restrict__ obox,
                  float *__restrict__ objs, uint64_t *__restrict__ keys, int *__restrict__ cnt)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= args.boxes)
        return;
    int k = 0;
    while (k + 1 < args.nlayers && t >= args.l[k + 1].base)
        k++;
    const dev_layer &l = args.l[k];
    /* Threads run anchor by anchor, cell by cell within an anchor: neighbours read neighbouring floats. */
    int wh = l.w * l.h, local = t - l.base, a = local / wh, cell = local - a * wh;
    size_t plane = (size_t)wh;
    const float *p = l.data + (size_t)a * (size_t)(5 + l.classes) * plane + cell;
    float obj = p[4 * plane];
    if (!(obj > args.thresh))
        return;
    int index = l.base + cell * l.n + a;
    float b[4], nb[4], ob[4];
    mk_px_yolo_box(p[0], p[plane], p[2 * plane], p[3 * plane], cell % l.w, cell / l.w, l.w, l.h, l.anchors[2 * a],
                   l.anchors[2 * a + 1], args.lb.dst_w, args.lb.dst_h, b);
    mk_px_yolo_place(&args.lb, b, nb, ob);
    nbox[index] = make_float4(nb[0], nb[1], nb[2], nb[3]);
    obox[index] = make_float4(ob[0], ob[1], ob[2], ob[3]);
    objs[index] = obj;
    for (int r = 0; r < args.ncls; r++) {
        float prob = MK_FMUL(obj, p[(size_t)(5 + args.c0 + r) * plane]);
        if (prob > args.thresh) {
            int slot = atomicAdd(&cnt[r], 1);
            keys[(size_t)r * args.boxes + slot] = mk_px_yolo_key(prob, (uint32_t)index);
        }
    }
}

/* Ascending sort of k[0..m) by the whole block: the bitonic network in its form where every comparator puts the
 * smaller key at the lower index (the first step of each merge compares mirror positions). A network for the next
 * power of two with +infinity beyond m would only compare those with larger indices and leave them in place, so
 * comparators reaching past m are skipped. Each step's pairs are disjoint; the lower index's thread owns a pair. */
__device__ void block_sort(uint64_t *k, int m)
{
    int p = 1;
    while (p < m)
        p <<= 1;
    for (int size = 2; size <= p; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < m; i += blockDim.x) {
                int l = stride == size >> 1 ? i ^ (size - 1) : i ^ stride;
                if (l > i && l < m) {
                    uint64_t x = k[i], y = k[l];
                    if (y < x) {
                        k[i] = y;
                        k[l] = x;
                    }
                }
            }
            __syncthreads();
        }
}

__device__ __forceinline__ int is_removed(const volatile unsigned *rm, int i)
{
    return (rm[i >> 5] >> (i & 31)) & 1;
}

/* The first entry at or after i not removed, or m. Called by every thread after a barrier: the bits up to the
 * answer are not written until the next barrier, so all threads find the same entry. */
__device__ int next_standing(const volatile unsigned *rm, int i, int m)
{
    while (i < m) {
        unsigned standing = ~rm[i >> 5] >> (i & 31);
        if (standing)
            return min(i + __ffs((int)standing) - 1, m);
        i = (i | 31) + 1;
    }
    return m;
}

/* Darknet's greedy loop on the sorted list: each entry still standing removes the later ones whose box overlaps
 * its box by more than nms. The box of entry j is sbox[j] (gathered in sorted order) or, without sbox, the box of
 * the index in its key. */
__device__ void block_suppress(const uint64_t *k, const float4 *sbox, const float4 *__restrict__ nbox, int m,
                               unsigned *rm, float nms)
{
    volatile unsigned *vrm = rm;
    for (int i = next_standing(vrm, 0, m); i < m; i = next_standing(vrm, i + 1, m)) {
        float4 av = sbox ? sbox[i] : nbox[mk_px_yolo_key_index(k[i])];
        float a[4] = {av.x, av.y, av.z, av.w};
        for (int j = i + 1 + (int)threadIdx.x; j < m; j += blockDim.x) {
            if (is_removed(vrm, j))
                continue;
            float4 bv = sbox ? sbox[j] : nbox[mk_px_yolo_key_index(k[j])];
            float b[4] = {bv.x, bv.y, bv.z, bv.w};
            if (mk_px_box_iou(a, b) > nms)
                atomicOr(&rm[j >> 5], 1u << (j & 31));
        }
        __syncthreads();
    }
}

/* Removed entries before position i. */
__device__ int removed_before(const unsigned *rm, int i)
{
    int c = 0;
    for (int w = 0; w < i >> 5; w++)
        c += __popc(rm[w]);
    if (i & 31)
        c += __popc(rm[i >> 5] & ((1u << (i & 31)) - 1));
    return c;
}

/* Shared memory: the removed bitmask for the longest possible list (`words`, a multiple of 4), then room for `cap`
 * entries: boxes, then keys. */
__global__ void __launch_bounds__(kClassThreads)
    class_kernel(uint64_t *__restrict__ keys, const int *__restrict__ cnt, int *__restrict__ nkept,
                 const float4 *__restrict__ nbox, int boxes, float nms, int words, int cap)
{
    extern __shared__ float4 smem[];
    int r = blockIdx.x, m = cnt[r];
    uint64_t *g = keys + (size_t)r * boxes;
    if (m == 0) {
        if (threadIdx.x == 0)
            nkept[r] = 0;
        return;
    }
    unsigned *rm = (unsigned *)smem;
    float4 *sbox = (float4 *)(rm + words);
    uint64_t *sk = (uint64_t *)(sbox + cap);
    int shared = m <= cap;
    uint64_t *k = shared ? sk : g;
    for (int w = threadIdx.x; w < (m + 31) >> 5; w += blockDim.x)
        rm[w] = 0;
    if (shared)
        for (int i = threadIdx.x; i < m; i += blockDim.x)
            k[i] = g[i];
    __syncthreads();
    block_sort(k, m);
    if (nms > 0) {
        if (shared) {
            for (int i = threadIdx.x; i < m; i += blockDim.x)
                sbox[i] = nbox[mk_px_yolo_key_index(k[i])];
            __syncthreads();
        }
        block_suppress(k, shared ? sbox : NULL, nbox, m, rm, nms);
    }
    /* Pack the survivors at the front of g, in order, a chunk at a time: all reads of a chunk happen before its
     * writes, which land at or before the chunk (k may be g itself). */
    for (int base = 0; base < m; base += blockDim.x) {
        int i = base + threadIdx.x;
        int keep = i < m && !is_removed(rm, i);
        uint64_t key = keep ? k[i] : 0;
        int pos = keep ? i - removed_before(rm, i) : 0;
        __syncthreads();
        if (keep)
            g[pos] = key;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        nkept[r] = m - removed_before(rm, m);
}

/* Entries of a sorted survivor list (n keys) that come before a survivor of probability bits ~hi of another
 * class: the more probable ones, and the equally probable ones when that class comes first. */
__device__ int count_ahead(const uint64_t *g, int n, uint32_t hi, int ties_ahead)
{
    int lo = 0, up = n;
    while (lo < up) {
        int mid = (lo + up) >> 1;
        uint32_t v = (uint32_t)(g[mid] >> 32);
        if (v < hi || (ties_ahead && v == hi))
            lo = mid + 1;
        else
            up = mid;
    }
    return lo;
}

__global__ void __launch_bounds__(kOutThreads)
    output_kernel(const uint64_t *__restrict__ keys, const int *__restrict__ nkept, int boxes, int ncls, int c0,
                  const float4 *__restrict__ obox, const float *__restrict__ objs, int max_out,
                  out_header *__restrict__ hdr, mk_detection_t *__restrict__ dets)
{
    for (int r = blockIdx.x; r < ncls; r += gridDim.x) {
        const uint64_t *g = keys + (size_t)r * boxes;
        int n = nkept[r];
        for (int j = threadIdx.x; j < n; j += blockDim.x) {
            uint64_t key = g[j];
            uint32_t hi = (uint32_t)(key >> 32);
            long long rank = j;
            for (int q = 0; q < ncls; q++)
                if (q != r)
                    rank += count_ahead(keys + (size_t)q * boxes, nkept[q], hi, q < r);
            if (rank >= max_out)
                continue;
            uint32_t index = mk_px_yolo_key_index(key);
            float4 ob = obox[index];
            mk_detection_t d;
            d.x = ob.x;
            d.y = ob.y;
            d.w = ob.z;
            d.h = ob.w;
            d.prob = mk_px_yolo_key_prob(key);
            d.objectness = objs[index];
            d.class_id = c0 + r;
            d.index = (int)index;
            dets[rank] = d;
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        long long total = 0;
        for (int q = 0; q < ncls; q++)
            total += nkept[q];
        hdr->n = total < max_out ? (int)total : max_out;
    }
}

/* Layer data must be device memory: a host pointer would fault the kernel and poison the context. */
int check_device_data(const mk_yolo_layer_t *layers, int nlayers)
{
    for (int k = 0; k < nlayers; k++) {
        cudaPointerAttributes attr;
        cudaError_t e = cudaPointerGetAttributes(&attr, layers[k].data);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return mk_err_set(MK_EINVAL, "yolo layer %d: data is not CUDA memory (%s)", k, cudaGetErrorString(e));
        }
        if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
            return mk_err_set(MK_EINVAL, "yolo layer %d: data is host memory; a CUDA context needs device memory",
                              k);
    }
    return 0;
}

} // namespace

extern "C" int mk_yolo_detect_cuda(mk_ctx_t *ctx, const mk_yolo_layer_t *layers, int nlayers,
                                   const mk_letterbox_t *lb, const mk_yolo_params_t *p, mk_detection_t *out,
                                   int max_out, int *n_out)
{
    int rc;
    if ((rc = check_device_data(layers, nlayers)))
        return rc;
    decode_args args;
    memset(&args, 0, sizeof args);
    args.nlayers = nlayers;
    for (int k = 0; k < nlayers; k++) {
        dev_layer &d = args.l[k];
        d.data = layers[k].data;
        d.w = layers[k].w;
        d.h = layers[k].h;
        d.n = layers[k].n;
        d.classes = layers[k].classes;
        d.base = args.boxes;
        memcpy(d.anchors, layers[k].anchors, sizeof d.anchors);
        args.boxes += d.w * d.h * d.n;
    }
    args.c0 = p->class_id >= 0 ? p->class_id : 0;
    args.ncls = p->class_id >= 0 ? 1 : layers[0].classes;
    args.thresh = p->thresh;
    args.lb = *lb;

    layout s = plan_layout(args.boxes, args.ncls, max_out);
    size_t out_bytes = sizeof(out_header) + (size_t)max_out * sizeof(mk_detection_t);
    char *dev;
    void *host;
    if ((rc = mk_ctx_scratch(ctx, MK_SCRATCH_YOLO, s.total, (void **)&dev, NULL)) ||
        (rc = mk_ctx_scratch(ctx, MK_SCRATCH_YOLO_HOST, out_bytes, &host, NULL)))
        return rc;
    float4 *nbox = (float4 *)(dev + s.nbox), *obox = (float4 *)(dev + s.obox);
    float *objs = (float *)(dev + s.obj);
    uint64_t *keys = (uint64_t *)(dev + s.keys);
    int *cnt = (int *)(dev + s.cnt), *nkept = (int *)(dev + s.nkept);
    out_header *hdr = (out_header *)(dev + s.out);
    mk_detection_t *dets = (mk_detection_t *)(hdr + 1);

    /* The class kernel's shared memory: the bitmask for the longest possible list, and as many entries as fit
     * beside it in what the device allows a block (682 entries at least: 48 KB, boxes <= MK_YOLO_MAX_BOXES). */
    int words = (args.boxes + 127) / 128 * 4, optin = 0;
    if ((rc = MK_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->device))))
        return rc;
    size_t budget = optin > kSmemDefault ? (size_t)optin : (size_t)kSmemDefault;
    size_t cap = (budget - (size_t)words * sizeof(unsigned)) / kEntryBytes;
    cap = cap < (size_t)args.boxes ? cap : (size_t)args.boxes;
    size_t smem = (size_t)words * sizeof(unsigned) + cap * kEntryBytes;
    /* The allowance is the device's maximum whatever this call needs: the same value from every context. */
    if (smem > (size_t)kSmemDefault &&
        (rc = MK_CUDA_CHECK(cudaFuncSetAttribute(class_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin))))
        return rc;
    cudaStream_t st = MK_STREAM(ctx);

    if ((rc = MK_CUDA_CHECK(cudaMemsetAsync(cnt, 0, (size_t)args.ncls * sizeof(int), st))))
        return rc;
    decode_kernel<<<(args.boxes + kDecodeThreads - 1) / kDecodeThreads, kDecodeThreads, 0, st>>>(args, nbox, obox,
                                                                                                 objs, keys, cnt);
    if ((rc = MK_CUDA_LAUNCH_CHECK(decode_kernel)))
        return rc;
    class_kernel<<<args.ncls, kClassThreads, smem, st>>>(keys, cnt, nkept, nbox, args.boxes, p->nms, words,
                                                         (int)cap);
    if ((rc = MK_CUDA_LAUNCH_CHECK(class_kernel)))
        return rc;
    output_kernel<<<args.ncls < 1024 ? args.ncls : 1024, kOutThreads, 0, st>>>(
        keys, nkept, args.boxes, args.ncls, args.c0, obox, objs, max_out, hdr, dets);
    if ((rc = MK_CUDA_LAUNCH_CHECK(output_kernel)))
        return rc;
    if ((rc = MK_CUDA_CHECK(cudaMemcpyAsync(host, hdr, out_bytes, cudaMemcpyDeviceToHost, st))) ||
        (rc = mk_cuda_sync(ctx)))
        return rc;
    const out_header *h = (const out_header *)host;
    memcpy(out, h + 1, (size_t)h->n * sizeof(mk_detection_t));
    *n_out = h->n;
    return 0;
}
