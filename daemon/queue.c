/* queue: the bounded drop-oldest FIFO between pipeline threads. */
#include "queue.h"

#include "errors.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct mk_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void **items;
    int cap, head, count, closed;
    uint64_t dropped;
};

int mk_queue_create(int capacity, mk_queue_t **out)
{
    if (!out)
        return mk_err_set(MK_EINVAL, "mk_queue_create: NULL argument");
    *out = NULL;
    if (capacity < 1 || capacity > 1024)
        return mk_err_set(MK_ERANGE, "queue capacity %d outside 1..1024", capacity);
    mk_queue_t *q = calloc(1, sizeof *q);
    if (!q || !(q->items = calloc((size_t)capacity, sizeof *q->items))) {
        free(q);
        return mk_err_set(MK_ENOMEM, "queue: out of memory");
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&q->mu, NULL);
    q->cap = capacity;
    *out = q;
    return 0;
}

void mk_queue_destroy(mk_queue_t *q)
{
    if (!q)
        return;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q->items);
    free(q);
}

int mk_queue_push(mk_queue_t *q, void *item, void **dropped)
{
    if (!q || !item || !dropped)
        return mk_err_set(MK_EINVAL, "mk_queue_push: NULL argument");
    *dropped = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return mk_err_set(MK_ESTATE, "queue closed");
    }
    if (q->count == q->cap) {
        *dropped = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        q->dropped++;
    }
    q->items[(q->head + q->count) % q->cap] = item;
    q->count++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

int mk_queue_pop(mk_queue_t *q, int timeout_ms, void **item)
{
    if (!q || !item)
        return mk_err_set(MK_EINVAL, "mk_queue_pop: NULL argument");
    *item = NULL;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    if (timeout_ms > 0) {
        dl.tv_sec += timeout_ms / 1000;
        dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    while (!q->count && !q->closed && timeout_ms != 0 && rc != ETIMEDOUT)
        rc = timeout_ms < 0 ? pthread_cond_wait(&q->cv, &q->mu) : pthread_cond_timedwait(&q->cv, &q->mu, &dl);
    int st;
    if (q->count) {
        *item = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        st = MK_QUEUE_ITEM;
    } else {
        st = q->closed ? MK_QUEUE_CLOSED : MK_QUEUE_EMPTY;
    }
    pthread_mutex_unlock(&q->mu);
    return st;
}

void mk_queue_close(mk_queue_t *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

int mk_queue_count(mk_queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    int n = q->count;
    pthread_mutex_unlock(&q->mu);
    return n;
}

uint64_t mk_queue_dropped(mk_queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    uint64_t n = q->dropped;
    pthread_mutex_unlock(&q->mu);
    return n;
}
