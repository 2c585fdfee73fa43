/* queue: a bounded FIFO of pointers between two pipeline threads that drops the oldest entry when it is full
 * (latency first: a stage that falls behind works on the newest frames).
 *
 * Thread rules: any number of threads may push and pop; every function takes the queue's lock briefly. Items are
 * opaque: the queue never frees them (a dropped or left-over item is handed back to the caller). */
#ifndef MK_QUEUE_H
#define MK_QUEUE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_queue mk_queue_t;

/* Statuses of mk_queue_pop (errors are negative). */
enum {
    MK_QUEUE_ITEM = 0,    /* an item was taken */
    MK_QUEUE_EMPTY = 1,   /* none arrived within the timeout */
    MK_QUEUE_CLOSED = 2,  /* closed and empty */
};

/* capacity 1..1024. */
int mk_queue_create(int capacity, mk_queue_t **out);
/* Frees the queue (not its items). NULL is a no-op. */
void mk_queue_destroy(mk_queue_t *q);

/* Appends item (non-NULL). When the queue is full, its oldest item is removed first and returned in *dropped
 * (NULL when nothing was dropped). Never waits. MK_ESTATE after close. */
int mk_queue_push(mk_queue_t *q, void *item, void **dropped);
/* Takes the oldest item, waiting up to timeout_ms (0: do not wait; < 0: until an item comes or the queue is
 * closed). */
int mk_queue_pop(mk_queue_t *q, int timeout_ms, void **item);
/* Wakes every waiting pop; later pushes fail, pops drain what is left and then return MK_QUEUE_CLOSED. */
void mk_queue_close(mk_queue_t *q);

int mk_queue_count(mk_queue_t *q);
/* Items dropped by pushes so far. */
uint64_t mk_queue_dropped(mk_queue_t *q);

#ifdef __cplusplus
}
#endif
#endif
