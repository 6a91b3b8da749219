/* The sim's event queue: a 4-ary min-heap with deterministic tie-breaking (keys (t, seq) are
 * unique, so the pop order is that of any correct priority queue; four children share two
 * cache lines and the tree is half as deep as a binary one). */
#include "sim/queue.h"

#include <stdlib.h>

static int earlier(const gs_qnode *x, const gs_qnode *y)
{
    return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

int gs_queue_push(gs_queue *q, double t, uint64_t id, uint32_t ver)
{
    return gs_queue_push_span(q, t, id, ver, 1);
}

int gs_queue_push_span(gs_queue *q, double t, uint64_t id, uint32_t ver, uint64_t n)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 1024;
        gs_qnode *a = realloc(q->a, cap * sizeof *a);
        if (!a)
            return -1;
        q->a = a;
        q->cap = cap;
    }
    gs_qnode node = {t, q->seq, id, ver};
    q->seq += n ? n : 1;
    size_t i = q->n++;
    while (i > 0) { /* sift up: move parents down into the hole */
        size_t p = (i - 1) / 4;
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
    if (n == 0)
        return top;
    /* Floyd's bottom-up pop: move the hole down along the smallest children to a leaf without
     * comparing with the last entry (it almost always belongs near the bottom), then sift the
     * last entry up from there: about half the comparisons of the top-down sift. */
    for (;;) {
        size_t l = 4 * i + 1;
        if (l >= n)
            break;
        size_t m = l, end = l + 4 < n ? l + 4 : n;
        for (size_t j = l + 1; j < end; j++)
            if (earlier(&q->a[j], &q->a[m]))
                m = j;
        q->a[i] = q->a[m];
        i = m;
    }
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (!earlier(&last, &q->a[p]))
            break;
        q->a[i] = q->a[p];
        i = p;
    }
    q->a[i] = last;
    return top;
}

void gs_queue_fini(gs_queue *q)
{
    free(q->a);
    q->a = NULL;
    q->n = q->cap = 0;
}
