/* occupancy: blocks of a kernel resident on one SM, asked of the runtime once per process and kept (CUDA files
 * only). The kernels are built for one architecture per device generation, so the answer holds for every context;
 * the callers plan their launches on every call, where the queries would cost host time before the first launch. */
#ifndef MK_OCCUPANCY_H
#define MK_OCCUPANCY_H

#include <atomic>

/* *per_sm from cache, or from query(&v) (a status: 0 or a negative code with the message set) the first time; an
 * answer below 1 is returned but not kept, for the caller to report. */
template <typename Query> int mk_cached_per_sm(std::atomic<int> &cache, Query query, int *per_sm)
{
    int v = cache.load(std::memory_order_relaxed);
    if (v < 1) {
        int rc = query(&v);
        if (rc)
            return rc;
        if (v >= 1)
            cache.store(v, std::memory_order_relaxed);
    }
    *per_sm = v;
    return 0;
}

#endif
