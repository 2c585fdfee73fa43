/* test_queue: the pipeline's drop-oldest queue — order, dropping the oldest when full, timeouts, close, and a
 * producer and a consumer thread that never lose or duplicate an item. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "errors.h"
#include "queue.h"

#include <pthread.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define ITEM(i) ((void *)(uintptr_t)(i))

static void test_order_and_drop(void **state)
{
    (void)state;
    mk_queue_t *q;
    assert_int_equal(mk_queue_create(0, &q), MK_ERANGE);
    assert_int_equal(mk_queue_create(3, &q), 0);
    void *dropped, *item;
    for (int i = 1; i <= 5; i++) {
        assert_int_equal(mk_queue_push(q, ITEM(i), &dropped), 0);
        assert_ptr_equal(dropped, i <= 3 ? NULL : ITEM(i - 3)); /* the oldest goes */
    }
    assert_int_equal(mk_queue_count(q), 3);
    assert_int_equal(mk_queue_dropped(q), 2);
    for (int i = 3; i <= 5; i++) {
        assert_int_equal(mk_queue_pop(q, 0, &item), MK_QUEUE_ITEM);
        assert_ptr_equal(item, ITEM(i));
    }
    assert_int_equal(mk_queue_pop(q, 0, &item), MK_QUEUE_EMPTY);
    double t0 = now_s();
    assert_int_equal(mk_queue_pop(q, 100, &item), MK_QUEUE_EMPTY);
    assert_true(now_s() - t0 >= 0.09);
    assert_int_equal(mk_queue_push(q, NULL, &dropped), MK_EINVAL);
    /* Close: what is left drains, then CLOSED; pushes fail. */
    assert_int_equal(mk_queue_push(q, ITEM(9), &dropped), 0);
    mk_queue_close(q);
    assert_int_equal(mk_queue_push(q, ITEM(10), &dropped), MK_ESTATE);
    assert_int_equal(mk_queue_pop(q, -1, &item), MK_QUEUE_ITEM);
    assert_ptr_equal(item, ITEM(9));
    assert_int_equal(mk_queue_pop(q, -1, &item), MK_QUEUE_CLOSED);
    mk_queue_destroy(q);
}

typedef struct {
    mk_queue_t *q;
    int n;
    uint64_t dropped_sum;
} prod_t;

static void *producer(void *arg)
{
    prod_t *p = arg;
    for (int i = 1; i <= p->n; i++) {
        void *dropped;
        assert_int_equal(mk_queue_push(p->q, ITEM(i), &dropped), 0);
        if (dropped)
            p->dropped_sum += (uintptr_t)dropped;
    }
    mk_queue_close(p->q);
    return NULL;
}

static void *closer(void *arg)
{
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    mk_queue_close(arg);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    prod_t p = {NULL, 200000, 0};
    assert_int_equal(mk_queue_create(4, &p.q), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, producer, &p), 0);
    uint64_t got_sum = 0, got = 0;
    uintptr_t last = 0;
    void *item;
    int rc;
    while ((rc = mk_queue_pop(p.q, -1, &item)) == MK_QUEUE_ITEM) {
        assert_true((uintptr_t)item > last); /* in order, never twice */
        last = (uintptr_t)item;
        got_sum += (uintptr_t)item;
        got++;
    }
    assert_int_equal(rc, MK_QUEUE_CLOSED);
    pthread_join(t, NULL);
    /* Every item was either taken or dropped, exactly once. */
    assert_int_equal(got_sum + p.dropped_sum, (uint64_t)p.n * (p.n + 1) / 2);
    assert_int_equal(got + mk_queue_dropped(p.q), (uint64_t)p.n);
    assert_int_equal(last, (uintptr_t)p.n);
    mk_queue_destroy(p.q);

    /* A waiting pop wakes when the queue is closed. */
    mk_queue_t *q;
    assert_int_equal(mk_queue_create(2, &q), 0);
    assert_int_equal(pthread_create(&t, NULL, closer, q), 0);
    double t0 = now_s();
    assert_int_equal(mk_queue_pop(q, 5000, &item), MK_QUEUE_CLOSED);
    assert_true(now_s() - t0 < 2);
    pthread_join(t, NULL);
    mk_queue_destroy(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_drop),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
