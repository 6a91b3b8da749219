/* Megatron-LM's command-line arguments, as engine/megatron_args.tsv lists them for one commit
 * of NVIDIA/Megatron-LM (its header names it; tests/megatron_args.py regenerates the file). The
 * table, engine/megatron_args_table.c, is generated from the file at build time; the lookups are
 * engine/megatron_args.c.
 *
 * Ownership: static tables; nothing to free. */
#ifndef GS_MEGATRON_ARGS_H
#define GS_MEGATRON_ARGS_H

#include <stddef.h>

/* Arities beyond a count of values: nargs '+', '*' and '?'. */
#define GS__MG_ARITY_MANY (-1)
#define GS__MG_ARITY_ANY (-2)
#define GS__MG_ARITY_OPT (-3)

typedef enum gs__mg_kind {
    GS__MG_VALUE, /* takes values */
    GS__MG_TRUE,  /* store_true switch: sets dest True */
    GS__MG_FALSE, /* store_false switch: sets dest False */
    GS__MG_CONST  /* store_const switch */
} gs__mg_kind;

typedef struct gs__mg_arg {
    const char *name;    /* without the leading -- */
    const char *dest;    /* argparse's dest: the name Megatron's printed argument dump uses */
    int arity;           /* values after the flag: 0, N, or GS__MG_ARITY_* */
    gs__mg_kind kind;
    const char *def;     /* the default as Python prints it (None, True, 0.1, 'adam', [..]), or ? */
} gs__mg_arg;

extern const gs__mg_arg gs__mg_args[]; /* sorted by name (strcmp) */
extern const size_t gs__mg_nargs;
extern const char gs__mg_args_source[]; /* "NVIDIA/Megatron-LM COMMIT DATE megatron/training/arguments.py" */

/* The argument named name[0..len) (no leading --), or NULL. O(log n). */
const gs__mg_arg *gs__mg_arg_find(const char *name, size_t len);
/* The first argument whose dest is dest, or NULL. O(n). */
const gs__mg_arg *gs__mg_arg_by_dest(const char *dest);
/* The argument name closest to name (edit distance, at most a third of its length), or NULL. */
const char *gs__mg_arg_nearest(const char *name);

#endif
