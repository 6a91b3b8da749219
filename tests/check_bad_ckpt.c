/* Check suite running the checkpoint parts of the bad-input corpus: every
 * tests/bad-input/index/NAME.json (an index.json) and tests/bad-input/safetensors/NAME.hdr (a
 * safetensors header, made into a file image: its 8-byte length, the header, then "# data: N"
 * zero bytes) must be refused as bad input (GS_ERR_INPUT: exit status 2) with an error holding the
 * fragment of its first line "# expect: FRAGMENT". Lines starting with '#' before the body are
 * the case's header. top_srcdir (set by make check) locates the corpus. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/status.h"
#include "exec/checkpoint.h"
#include "exec/safetensors.h"

typedef struct bad_case {
    char fragment[512];
    unsigned long data; /* "# data: N": zero bytes after a safetensors header */
    char *body;         /* the rest of the file (owned) */
    size_t len;
} bad_case;

static int read_case(const char *path, bad_case *c)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char line[512];
    long body_at = 0;
    while (fgets(line, sizeof line, f) && line[0] == '#') {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "# expect: ", 10) == 0)
            snprintf(c->fragment, sizeof c->fragment, "%s", line + 10);
        else if (strncmp(line, "# data: ", 8) == 0)
            c->data = strtoul(line + 8, NULL, 10);
        body_at = ftell(f);
    }
    fseek(f, 0, SEEK_END);
    long end = ftell(f);
    c->len = (size_t)(end - body_at);
    c->body = malloc(c->len + 1);
    fseek(f, body_at, SEEK_SET);
    size_t got = c->body ? fread(c->body, 1, c->len, f) : 0;
    fclose(f);
    if (!c->body || got != c->len)
        return -1;
    c->body[c->len] = '\0';
    while (c->len && c->body[c->len - 1] == '\n') /* the header's text ends at its last brace */
        c->body[--c->len] = '\0';
    return c->fragment[0] ? 0 : -1;
}

/* Runs every case of dir with ext through parse(); returns the number of cases. */
static int run_dir(const char *sub, const char *ext, gs_status (*parse)(const bad_case *c, gs_error *err))
{
    const char *top = getenv("top_srcdir");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/bad-input/%s", top && *top ? top : ".", sub);
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), le = strlen(ext);
        if (l <= le || strcmp(e->d_name + l - le, ext) != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        bad_case c;
        ck_assert_msg(read_case(path, &c) == 0, "%s: no '# expect: FRAGMENT' line or unreadable", path);
        gs_error err;
        gs_error_init(&err);
        gs_status st = parse(&c, &err);
        ck_assert_msg(st == GS_ERR_INPUT && gs_status_exit_code(st) == 2, "%s/%s: status %d, expected bad input: %s",
                      sub, e->d_name, (int)st, err.msg);
        ck_assert_msg(strstr(err.msg, c.fragment) != NULL, "%s/%s: error lacks '%s': %s", sub, e->d_name, c.fragment,
                      err.msg);
        free(c.body);
        n++;
    }
    closedir(d);
    return n;
}

static gs_status parse_index(const bad_case *c, gs_error *err)
{
    gs_ckpt_index ix;
    gs_status st = gs_ckpt_index_parse(c->body, c->len, &ix, err);
    if (st == GS_OK)
        gs_ckpt_index_fini(&ix);
    return st;
}

static gs_status parse_header(const bad_case *c, gs_error *err)
{
    size_t n = 8 + c->len + c->data;
    unsigned char *img = calloc(n, 1);
    if (!img)
        return GS_ERR_NOMEM;
    for (int b = 0; b < 8; b++)
        img[b] = (unsigned char)((uint64_t)c->len >> (8 * b));
    memcpy(img + 8, c->body, c->len);
    gs_st_header h;
    gs_status st = gs_safetensors_parse_image(img, n, &h, err);
    if (st == GS_OK)
        gs_st_header_fini(&h);
    free(img);
    return st;
}

START_TEST(index_files)
{
    int n = run_dir("index", ".json", parse_index);
    ck_assert_int_ge(n, 20);
}
END_TEST

START_TEST(safetensors_headers)
{
    int n = run_dir("safetensors", ".hdr", parse_header);
    ck_assert_int_ge(n, 12);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bad_ckpt");
    TCase *tc = tcase_create("corpus");
    tcase_add_test(tc, index_files);
    tcase_add_test(tc, safetensors_headers);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* every case's message at once on failure */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
