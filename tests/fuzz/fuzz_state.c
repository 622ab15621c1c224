/* fuzz_state.c - libFuzzer harness: the resume-state reader (train_state.h).
 *
 * The input is a state file for a model of FUZZ_STATE_N parameters, read for AdamW (two
 * moments) and for SGD (one). vt_train_state_read either fails with a message naming the
 * file and leaves the moment buffers untouched, or returns a state whose moments are
 * finite (v non-negative) and which vt_train_state_write writes back to a file that
 * reads the same.
 */
#include <math.h>

#include "fuzz_util.h"
#include "train_state.h"

static void state_round_trip(const vt_train_state *s, const float *m, const float *v) {
    char out[128];
    snprintf(out, sizeof out, "%s/state_round_trip.safetensors", fuzz_dir());
    FUZZ_CHECK(vt_train_state_write(out, s, m, v, FUZZ_STATE_N, s->config) == VT_OK, "rewrite: %s",
               vt_last_error());
    float m2[FUZZ_STATE_N], v2[FUZZ_STATE_N];
    vt_train_state b;
    FUZZ_CHECK(vt_train_state_read(out, FUZZ_STATE_N, m2, v ? v2 : NULL, &b) == VT_OK,
               "re-read: %s", vt_last_error());
    FUZZ_CHECK(b.step == s->step && b.epoch == s->epoch && b.batch == s->batch &&
                   b.optim_t == s->optim_t && memcmp(b.rng, s->rng, sizeof b.rng) == 0 &&
                   b.params_hash == s->params_hash && b.best_top1 == s->best_top1 &&
                   b.wall_s == s->wall_s && b.best_step == s->best_step &&
                   memcmp(&b.epoch_stats, &s->epoch_stats, sizeof b.epoch_stats) == 0,
               "state fields differ after the round trip");
    FUZZ_CHECK(memcmp(m, m2, sizeof m2) == 0 && (!v || memcmp(v, v2, sizeof v2) == 0),
               "moments differ after the round trip");
    FUZZ_CHECK((s->config == NULL) == (b.config == NULL) ||
                   (s->config == NULL && b.config && strcmp(b.config, "{}") == 0),
               "config presence differs after the round trip");
    free(b.config);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_memfile(data, size);
    for (int adamw = 0; adamw < 2; adamw++) {
        float m[FUZZ_STATE_N], v[FUZZ_STATE_N];
        for (int i = 0; i < FUZZ_STATE_N; i++) m[i] = v[i] = -7.0f;
        vt_train_state s;
        vt_status st = vt_train_state_read(path, FUZZ_STATE_N, m, adamw ? v : NULL, &s);
        if (st != VT_OK) {
            FUZZ_CHECK(strstr(vt_last_error(), path) != NULL, "message without the file: %s",
                       vt_last_error());
            for (int i = 0; i < FUZZ_STATE_N; i++)
                FUZZ_CHECK(m[i] == -7.0f && v[i] == -7.0f, "a failed read wrote the moments");
            continue;
        }
        for (int i = 0; i < FUZZ_STATE_N; i++)
            FUZZ_CHECK(isfinite(m[i]) && (!adamw || (isfinite(v[i]) && v[i] >= 0)),
                       "moment %d: m %g v %g", i, m[i], v[i]);
        state_round_trip(&s, m, adamw ? v : NULL);
        free(s.config);
    }
    return 0;
}
