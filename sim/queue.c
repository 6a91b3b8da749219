/* The sim's event queue: a 4-ary min-heap with deterministic tie-breaking (keys (t, seq) are
 * unique, so the pop order is that of any correct priority queue; the tree is half as deep as
 * a binary one). The keys are kept apart from the payloads as pairs of integers, 16 bytes, so
 * that an entry's four children fill one 64-byte line (the array is offset by three entries
 * for that) and the smallest of them is found without branches. */
#include "sim/queue.h"

#include <stdlib.h>
#include <string.h>

#define KEY_OFFSET 3 /* key[-3 ..] is the allocation: children 4i+1 .. 4i+4 start a 64-byte line */
#define LINE_BYTES 64

/* Doubles to unsigned integers of the same order (sign bit flipped for positives, every bit
 * for negatives; -0.0 counts as 0.0, as it compares equal to it). */
static inline uint64_t time_key(double t)
{
    uint64_t b;
    t += 0.0; /* -0.0 + 0.0 = +0.0 */
    memcpy(&b, &t, sizeof b);
    return b >> 63 ? ~b : b | 1ULL << 63;
}

static inline double key_time(uint64_t k)
{
    uint64_t b = k >> 63 ? k & ~(1ULL << 63) : ~k;
    double t;
    memcpy(&t, &b, sizeof t);
    return t;
}

static inline int earlier(const gs_qkey *x, const gs_qkey *y)
{
    return (x->t < y->t) | ((x->t == y->t) & (x->seq < y->seq));
}

static int grow(gs_queue *q)
{
    size_t cap = q->cap ? q->cap * 2 : 1024;
    size_t bytes = (cap + KEY_OFFSET) * sizeof(gs_qkey);
    gs_qkey *mem = aligned_alloc(LINE_BYTES, (bytes + LINE_BYTES - 1) / LINE_BYTES * LINE_BYTES);
    gs_qval *val = realloc(q->val, cap * sizeof *val);
    if (!mem || !val) {
        free(mem);
        if (val)
            q->val = val;
        return -1;
    }
    if (q->n)
        memcpy(mem + KEY_OFFSET, q->key, q->n * sizeof *mem);
    free(q->key_mem);
    q->key_mem = mem;
    q->key = mem + KEY_OFFSET;
    q->val = val;
    q->cap = cap;
    return 0;
}

int gs_queue_push(gs_queue *q, double t, uint64_t id, uint32_t ver)
{
    return gs_queue_push_span(q, t, id, ver, 1);
}

int gs_queue_push_span(gs_queue *q, double t, uint64_t id, uint32_t ver, uint64_t n)
{
    if (q->n == q->cap && grow(q) != 0)
        return -1;
    gs_qkey key = {time_key(t), q->seq};
    gs_qval val = {id, ver, t == 0.0 && 1.0 / t < 0.0};
    q->seq += n ? n : 1;
    gs_qkey *k = q->key;
    gs_qval *v = q->val;
    size_t i = q->n++;
    while (i > 0) { /* sift up: move parents down into the hole */
        size_t p = (i - 1) / 4;
        if (!earlier(&key, &k[p]))
            break;
        k[i] = k[p];
        v[i] = v[p];
        i = p;
    }
    k[i] = key;
    v[i] = val;
    return 0;
}

gs_qnode gs_queue_pop(gs_queue *q)
{
    gs_qkey *k = q->key;
    gs_qval *v = q->val;
    gs_qnode top = {v[0].neg_zero ? -0.0 : key_time(k[0].t), k[0].seq, v[0].id, v[0].ver};
    size_t n = --q->n, i = 0;
    if (n == 0)
        return top;
    gs_qkey last = k[n];
    gs_qval last_v = v[n];
    /* Floyd's bottom-up pop: move the hole down along the smallest children to a leaf without
     * comparing with the last entry (it almost always belongs near the bottom), then sift the
     * last entry up from there: about half the comparisons of the top-down sift. */
    for (;;) {
        size_t l = 4 * i + 1, m;
        if (l + 4 <= n) { /* four children: a tournament, without branches */
            size_t a = l + earlier(&k[l + 1], &k[l]);
            size_t b = l + 2 + earlier(&k[l + 3], &k[l + 2]);
            m = earlier(&k[b], &k[a]) ? b : a;
        } else if (l < n) {
            m = l;
            for (size_t j = l + 1; j < n; j++)
                if (earlier(&k[j], &k[m]))
                    m = j;
        } else {
            break;
        }
        k[i] = k[m];
        v[i] = v[m];
        i = m;
    }
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (!earlier(&last, &k[p]))
            break;
        k[i] = k[p];
        v[i] = v[p];
        i = p;
    }
    k[i] = last;
    v[i] = last_v;
    return top;
}

double gs_queue_time_at(const gs_queue *q, size_t i)
{
    return q->val[i].neg_zero ? -0.0 : key_time(q->key[i].t);
}

uint64_t gs_queue_bytes(const gs_queue *q)
{
    return (uint64_t)q->cap * (sizeof *q->key + sizeof *q->val);
}

void gs_queue_fini(gs_queue *q)
{
    free(q->key_mem);
    free(q->val);
    q->key_mem = NULL;
    q->key = NULL;
    q->val = NULL;
    q->n = q->cap = 0;
}
