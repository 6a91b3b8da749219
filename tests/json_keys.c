/* json_keys: prints the key path of every value in the JSON documents it reads, one per line,
 * each path once, sorted: "a" for a top-level key, "a.b" inside an object, "a[]" for an array's
 * elements and "a[].b" for a key of an object in an array ("[]" alone for a top-level array).
 * tests/run_json_keys.sh checks these paths against doc/json.md.
 *
 * usage: json_keys FILE...   (a file may hold several documents one after another, as a
 * concatenation of gridstep outputs does; "-" reads standard input). Exit 0, or 1 with a
 * message naming the file, line and column of a document that does not parse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

typedef struct paths {
    char **v;
    size_t n, cap;
} paths;

static int add(paths *p, const char *s)
{
    if (p->n == p->cap) {
        size_t c = p->cap ? 2 * p->cap : 256;
        char **t = realloc(p->v, c * sizeof *t);
        if (!t)
            return -1;
        p->v = t;
        p->cap = c;
    }
    if (!(p->v[p->n] = strdup(s)))
        return -1;
    p->n++;
    return 0;
}

/* Adds the path of every value under v (prefix is v's own path, "" at the top). */
static int walk(paths *p, const json_t *v, const char *prefix)
{
    char path[1024];
    if (json_is_object(v)) {
        const char *key;
        json_t *x;
        json_object_foreach((json_t *)v, key, x) {
            snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", key);
            if (add(p, path) != 0 || walk(p, x, path) != 0)
                return -1;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        snprintf(path, sizeof path, "%s[]", prefix);
        json_array_foreach(v, i, x) {
            if (add(p, path) != 0 || walk(p, x, path) != 0)
                return -1;
        }
    }
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    paths p = {NULL, 0, 0};
    int status = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: json_keys FILE...\n");
        return 2;
    }
    for (int i = 1; i < argc && status == 0; i++) {
        FILE *f = strcmp(argv[i], "-") ? fopen(argv[i], "r") : stdin;
        if (!f) {
            fprintf(stderr, "json_keys: %s: cannot read\n", argv[i]);
            status = 1;
            break;
        }
        for (;;) {
            json_error_t je;
            json_t *doc = json_loadf(f, JSON_DISABLE_EOF_CHECK, &je);
            if (!doc) {
                /* the end of the file (only blank space left) is not an error */
                int c;
                while ((c = fgetc(f)) != EOF && (c == ' ' || c == '\n' || c == '\t' || c == '\r'))
                    ;
                if (c != EOF) {
                    fprintf(stderr, "json_keys: %s:%d:%d: %s\n", argv[i], je.line, je.column, je.text);
                    status = 1;
                }
                break;
            }
            if (walk(&p, doc, "") != 0) {
                fprintf(stderr, "json_keys: out of memory\n");
                status = 1;
            }
            json_decref(doc);
            if (status)
                break;
        }
        if (f != stdin)
            fclose(f);
    }
    qsort(p.v, p.n, sizeof *p.v, cmp);
    for (size_t i = 0; status == 0 && i < p.n; i++)
        if (i == 0 || strcmp(p.v[i], p.v[i - 1]) != 0)
            puts(p.v[i]);
    for (size_t i = 0; i < p.n; i++)
        free(p.v[i]);
    free(p.v);
    return status;
}
