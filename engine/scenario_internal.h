/* The scenario loader's files share this: engine/scenario.c (the document, its root, grid, batch
 * and stragglers, the load API), engine/scenario_value.c (scalar values and optional fields of a
 * mapping, with their messages), engine/scenario_model.c, engine/scenario_cluster.c and
 * engine/scenario_strategy.c (one section each); engine/scenario_mesh.c checks a loaded scenario
 * against its mesh and needs none of it.
 *
 * Ownership: every function borrows the loader (engine/yaml_doc.h) and its document's nodes for
 * the call and writes only into the caller's gs_scenario part; errors go to l->err, placed at
 * file:line:column. */
#ifndef GS_SCENARIO_INTERNAL_H
#define GS_SCENARIO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "engine/scenario.h"
#include "engine/yaml_doc.h"

/* ---- messages and values (engine/scenario_value.c) ---- */

/* Prefixes an error set by another module (whose message names its subject) with the
 * location of node n. */
void gs__scenario_prefix_at(const gs__yaml_loader *l, const yaml_node_t *n);

/* Error for a name outside a fixed list: "FIELD: found unknown value 'x' (did you mean 'y'?),
 * expected one of ...". */
gs_status gs__scenario_fail_name(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                                 const char *const *names, size_t n);

/* A positive integer (or zero when allow_zero): plain, integral scientific notation (7e9) or
 * K/M/B/T suffixed. */
gs_status gs__scenario_value_u64(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                                 uint64_t *out, int allow_zero);
/* A positive integer, as gs__scenario_value_u64 without zero. */
gs_status gs__scenario_value_count(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                                   uint64_t *out);
/* A preset name: a plain or quoted non-null scalar. Returns its text or NULL after an error. */
const char *gs__scenario_value_name(const gs__yaml_loader *l, const yaml_node_t *v, const char *field,
                                    const char *expected);

/* Optional fields of a mapping: absent leaves *dst alone; `given` (may be NULL) says whether the
 * key was there. Messages name the field "section.key". */
gs_status gs__scenario_opt_count(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                 const char *key, uint64_t *dst, int *given);
/* A finite real number > 0. */
gs_status gs__scenario_opt_real(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                const char *key, double *dst, int *given);
/* A finite real number in (0, 1]. */
gs_status gs__scenario_opt_fraction(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                    const char *key, double *dst, int *given);
/* true/false/yes/no/on/off (any case). */
gs_status gs__scenario_opt_bool(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                const char *key, int *dst, int *given);
/* A non-empty string that fits in len bytes (NUL included). */
gs_status gs__scenario_opt_string(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                  const char *key, char *buf, size_t len);

/* The names an enum field accepts: the canonical ones (for "expected one of") and how to read
 * one (parse returns 0 on success and stores the value). */
typedef struct gs__scenario_names {
    const char *const *names;
    size_t n;
    int (*parse)(const char *, int *);
} gs__scenario_names;

/* A name from a fixed table: absent leaves *dst alone. */
gs_status gs__scenario_opt_enum(const gs__yaml_loader *l, const yaml_node_t *map, const char *section,
                                const char *key, const gs__scenario_names *t, int *dst);

/* ---- sections (one file each) ---- */

/* GS_OK unless the strategy mapping v names a delayed-scaling key (fp8_amax_history,
 * fp8_amax_algo, fp8_margin) while s's resolved recipe is not delayed (engine/scenario_strategy.c). */
gs_status gs__scenario_fp8_recipe_keys(const gs__yaml_loader *l, const yaml_node_t *v, const gs_strategy *s);

/* model: a preset name or a mapping of model fields, validated (engine/scenario_model.c). */
gs_status gs__scenario_load_model(const gs__yaml_loader *l, const yaml_node_t *v, gs_model *m);
/* cluster: a preset name or a mapping (gpu, intra, nic, ...), validated
 * (engine/scenario_cluster.c). */
gs_status gs__scenario_load_cluster(const gs__yaml_loader *l, const yaml_node_t *v, gs_cluster *c);
/* strategy: the defaults, then a mapping's fields (v may be NULL: the defaults alone)
 * (engine/scenario_strategy.c). */
gs_status gs__scenario_load_strategy(const gs__yaml_loader *l, const yaml_node_t *v, gs_strategy *s);

#endif
