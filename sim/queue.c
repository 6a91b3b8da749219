/* The sim's event queue: a binary min-heap with deterministic tie-breaking. */
#include "sim/queue.h"

#include <stdlib.h>

static int earlier(const gs_qnode *x, const gs_qnode *y)
{
    return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

int gs_queue_push(gs_queue *q, double t, uint64_t id, uint32_t ver)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 1024;
        gs_qnode *a = realloc(q->a, cap * sizeof *a);
        if (!a)
            return -1;
        q->a = a;
        q->cap = cap;
    }
    gs_qnode node = {t, q->seq++, id, ver};
    size_t i = q->n++;
    while (i > 0) { /* sift up: move parents down into the hole */
        size_t p = (i - 1) / 2;
        if (!earlier(&node, &q->a[p]))
            break;
        q->a[i] = q->a[p];
        i = p;
    }
    q->a[i] = node;
    return 0;
}

gs_qnode gs_queue_pop(gs_queue *q)
{
    gs_qnode top = q->a[0];
    gs_qnode last = q->a[--q->n];
    size_t i = 0, n = q->n;
    for (;;) { /* sift down the hole left by the top */
        size_t l = 2 * i + 1;
        if (l >= n)
            break;
        size_t m = (l + 1 < n && earlier(&q->a[l + 1], &q->a[l])) ? l + 1 : l;
        if (!earlier(&q->a[m], &last))
            break;
        q->a[i] = q->a[m];
        i = m;
    }
    if (n > 0)
        q->a[i] = last;
    return top;
}

void gs_queue_fini(gs_queue *q)
{
    free(q->a);
    q->a = NULL;
    q->n = q->cap = 0;
}
