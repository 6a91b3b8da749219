/* Megatron-Core's pipeline layout strings (engine/pipeline_layout.h): expanded by a recursive
 * reader (parentheses may nest, which Megatron's regular expressions do not need), then split
 * into virtual stages and counted. */
#include "engine/pipeline_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPAND_MAX 65536 /* bytes of the expanded layout */

typedef struct reader {
    const char *s;
    size_t i;
    char out[EXPAND_MAX];
    size_t n;
    char why[160];
} reader;

static int fail(reader *r, const char *msg)
{
    if (!r->why[0])
        snprintf(r->why, sizeof r->why, "%s (at character %zu)", msg, r->i + 1);
    return -1;
}

/* "*N" after an item: N (1 when absent); -1 on a bad count. */
static long repeat_count(reader *r)
{
    if (r->s[r->i] != '*')
        return 1;
    r->i++;
    if (r->s[r->i] < '0' || r->s[r->i] > '9')
        return fail(r, "'*' without a repeat count"), -1;
    long n = 0;
    while (r->s[r->i] >= '0' && r->s[r->i] <= '9') {
        n = n * 10 + (r->s[r->i++] - '0');
        if (n > EXPAND_MAX)
            return fail(r, "a repeat count past 65536"), -1;
    }
    return n;
}

/* Appends out[from .. n) count - 1 more times. */
static int replicate(reader *r, size_t from, long count)
{
    size_t piece = r->n - from;
    if (count == 0) {
        r->n = from;
        return 0;
    }
    for (long k = 1; k < count; k++) {
        if (r->n + piece > EXPAND_MAX)
            return fail(r, "the layout expands past 64 KiB");
        memmove(r->out + r->n, r->out + from, piece);
        r->n += piece;
    }
    return 0;
}

/* A sequence of items up to the end or a ')' (depth > 0). */
static int read_seq(reader *r, int depth)
{
    while (r->s[r->i] && r->s[r->i] != ')') {
        char c = r->s[r->i];
        size_t from = r->n;
        if (c == ',' || c == ' ') {
            r->i++;
            continue;
        }
        if (c == '(') {
            if (depth > 16)
                return fail(r, "parentheses nested past 16");
            r->i++;
            if (read_seq(r, depth + 1) != 0)
                return -1;
            if (r->s[r->i] != ')')
                return fail(r, "'(' without its ')'");
            r->i++;
        } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
            if (r->n >= EXPAND_MAX)
                return fail(r, "the layout expands past 64 KiB");
            r->out[r->n++] = c;
            r->i++;
        } else {
            return fail(r, "expected E, t, m, L, '|', '(', ')' or '*N'");
        }
        long count = repeat_count(r);
        if (count < 0 || replicate(r, from, count) != 0)
            return -1;
    }
    if (depth == 0 && r->s[r->i] == ')')
        return fail(r, "')' without its '('");
    return 0;
}

/* Counts the expanded layout's virtual stages into out. */
static int count_stages(reader *r, gs_layout *out)
{
    size_t stages = 1;
    for (size_t k = 0; k < r->n; k++)
        stages += r->out[k] == '|';
    if (stages > GS_LAYOUT_MAX)
        return snprintf(r->why, sizeof r->why, "%zu virtual stages, expected at most %d", stages, GS_LAYOUT_MAX), -1;
    memset(out, 0, sizeof *out);
    out->n = (uint16_t)stages;
    size_t k = 0, count = 0;
    for (size_t j = 0; j <= r->n; j++) {
        char c = j < r->n ? r->out[j] : '|';
        int last = k + 1 == stages;
        if (c == 'E' && j != 0)
            return snprintf(r->why, sizeof r->why, "'E' (the embedding) must open the first virtual stage"), -1;
        if (c == 'L' && j + 1 != r->n)
            return snprintf(r->why, sizeof r->why, "'L' (the loss) must close the last virtual stage"), -1;
        if (c == 'm' && (!last || out->mtp == 255))
            return snprintf(r->why, sizeof r->why,
                            "'m' (a multi-token prediction module) outside the last virtual stage: gridstep builds "
                            "the modules there"), -1;
        if (c == 'm')
            out->mtp++;
        if (c == 't') {
            if (out->mtp)
                return snprintf(r->why, sizeof r->why, "a decoder layer after an 'm': Megatron places the MTP "
                                                       "modules after every decoder layer"), -1;
            if (++count > 255)
                return snprintf(r->why, sizeof r->why, "virtual stage %zu holds more than 255 layers", k), -1;
        }
        if (c != '|')
            continue;
        if (count == 0)
            return snprintf(r->why, sizeof r->why, "virtual stage %zu holds no decoder layer (gridstep builds none)", k),
                   -1;
        out->layers[k++] = (uint8_t)count;
        count = 0;
    }
    if (r->n == 0 || r->out[0] != 'E' || r->out[r->n - 1] != 'L')
        return snprintf(r->why, sizeof r->why, "a layout opens with 'E' and closes with 'L'"), -1;
    return 0;
}

int gs_layout_parse(const char *s, gs_layout *out, char *why, size_t len)
{
    reader *r = calloc(1, sizeof *r);
    int rc = -1;
    if (!r) {
        snprintf(why, len, "out of memory");
        return -1;
    }
    r->s = s;
    if (read_seq(r, 0) == 0 && count_stages(r, out) == 0)
        rc = 0;
    if (rc != 0)
        snprintf(why, len, "%s", r->why[0] ? r->why : "not a layout");
    free(r);
    return rc;
}

/* One virtual stage's text: E on the first, t*n, m for each module and L on the last. */
static void stage_text(const gs_layout *l, size_t k, char *buf, size_t len)
{
    int first = k == 0, last = k + 1 == l->n;
    char mods[260] = "";
    for (size_t j = 0; last && j < l->mtp && j + 1 < sizeof mods; j++)
        mods[j] = 'm', mods[j + 1] = '\0';
    if (l->layers[k] == 1)
        snprintf(buf, len, "%st%s%s", first ? "E" : "", mods, last ? "L" : "");
    else
        snprintf(buf, len, "%st*%u%s%s", first ? "E" : "", (unsigned)l->layers[k], mods, last ? "L" : "");
}

void gs_layout_format(const gs_layout *l, char *buf, size_t len)
{
    size_t at = 0;
    char a[300], b[300];
    if (len)
        buf[0] = '\0';
    for (size_t k = 0; k < l->n && at < len;) {
        stage_text(l, k, a, sizeof a);
        size_t r = 1; /* identical following stages, the last excepted */
        while (k + 1 < l->n && k + r + 1 < l->n) {
            stage_text(l, k + r, b, sizeof b);
            if (strcmp(a, b) != 0)
                break;
            r++;
        }
        if (r < 3) /* two stages read plainer written out */
            r = 1;
        int n = k + 1 == l->n ? snprintf(buf + at, len - at, "%s", a)
                : r > 1       ? snprintf(buf + at, len - at, "(%s|)*%zu", a, r)
                              : snprintf(buf + at, len - at, "%s|", a);
        if (n < 0 || (size_t)n >= len - at)
            return;
        at += (size_t)n;
        k += r;
    }
}

uint64_t gs_layout_layers_before(const gs_layout *l, uint64_t k)
{
    uint64_t sum = 0;
    for (uint64_t j = 0; j < k && j < l->n; j++)
        sum += l->layers[j];
    return sum;
}

uint64_t gs_layout_total(const gs_layout *l)
{
    return gs_layout_layers_before(l, l->n);
}
