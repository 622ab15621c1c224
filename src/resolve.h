/* resolve.h - resolution of a parsed config: one pass, after parsing and --set, that
 * makes every value explicit and checks every rule that involves more than one key.
 *
 * Owns: presets (model.preset -> width, depth, heads), the defaults that depend on other
 * keys (a PE kind's through its entry's resolve hook, a dataset format's through its
 * descriptor, the rest here: pe.coord_dim, pe.train_img_size, eval.batch_size), and the
 * rules between keys (a PE kind's through its check hook, a format's through its
 * descriptor, the model's and the recipe's here), each with a user-facing message that
 * names the key. Also the views of a resolved config the model (vt_model_spec) and the
 * data pipeline (vt_data_spec) receive, and the generated configuration reference with
 * the kinds' defaults.
 * Does not own: parsing and the per-key checks (config.c), what the values mean at run
 * time (vit.c, pe/, train.c, data/).
 *
 * A key left out (not in the file nor in a --set) takes its resolved default; so does a
 * key given as its "default" value: pe.theta, pe.block_size, pe.train_img_size and
 * eval.batch_size given as 0, data.train_transform and data.eval_transform given as auto.
 * The result holds every value: vt_config_to_json of a resolved config, read back and
 * resolved again, gives the same config (tests/test_config.c checks this for every
 * config in configs/ and every preset x PE kind x dataset format), so the config.json of
 * a run directory runs that run again, bit for bit. Resolving again after a --set that
 * changes pe.kind re-derives every key that was not given.
 *
 * Nothing below resolve asks whether a key was given (vt_config_is_set): the rules
 * checked here are only asserted there.
 *
 * Adding a key whose default depends on another key, or a rule between keys: a PE
 * kind's goes in its entry's resolve / check hook (src/pe/<kind>.c), a dataset format's
 * in its descriptor (src/data/<format>.c), any other in vt_resolve (resolve.c: a
 * default in resolve_defaults, a rule in check_rules), with the schema row's auto_doc
 * naming the default and a bad-input test in tests/test_config.c.
 */
#ifndef VT_RESOLVE_H
#define VT_RESOLVE_H

#include "config.h"
#include "data/dataset.h"
#include "status.h"

/* Resolve c in place: the per-key checks, presets and dependent defaults, then every
 * rule between keys. Errors are VT_ERR_USAGE naming c->source (or "config") and the key.
 * Idempotent. */
vt_status vt_resolve(vt_config *c);
/* vt_config_read_json, then vt_resolve (the JSON of a config file or of checkpoint
 * metadata). */
vt_status vt_resolve_json(vt_config *c, const char *json, const char *source);
/* vt_config_read_file (path may be NULL: the defaults) with n_sets --set assignments,
 * then vt_resolve once, so an override may repair a file that is invalid on its own. */
vt_status vt_resolve_file(vt_config *c, const char *path, const char *const *sets, int n_sets);

/* The rule for any image size the model sees (model.img_size, pe.train_img_size,
 * eval.resolutions, `vitrain eval --resolutions`): a positive multiple of patch.
 * VT_ERR_USAGE "<what> = S is not a multiple of model.patch_size = P; the nearest valid
 * sizes are A and B" otherwise (what names the value, with any source prefix). The config's
 * own sizes are checked by vt_resolve, whose message marks a value given by --set as such
 * (and names --set, not the file, when the --sets gave every value involved). Code below
 * asserts it. */
vt_status vt_resolve_image_size(int S, int patch, const char *what);

/* The model's view of a resolved config (model_spec.h): its model, pe and performer
 * sections, what vt_vit_init / vt_vit_plan take. Fills *out and returns out. */
const vt_model_spec *vt_resolve_model_spec(const vt_config *c, vt_model_spec *out);

/* The data pipeline's view of a resolved config (dataset.h): the data section, the
 * parsed RandAugment policy, model.img_size / in_chans / num_classes, train.seed,
 * train.label_smoothing, train.batch_size and eval.batch_size. */
void vt_resolve_data_spec(const vt_config *c, vt_data_spec *out);

/* Where model.num_classes of resolved c comes from, in words, into buf (len bytes):
 * "given", "from the data (...)" when the format's files or the config fix them, or the
 * schema default and why (`vitrain info`). Returns buf. */
const char *vt_resolve_classes_origin(const vt_config *c, char *buf, size_t len);

/* configs/README.md: config.h's key reference followed by the defaults and rules of
 * every PE kind and dataset format (malloc'd). */
char *vt_resolve_doc_markdown(void);

#endif
