/* fuzz_config.c - libFuzzer harness: the config parser and resolution with the print /
 * re-parse round trip.
 *
 * The input is JSON text, optionally followed by a NUL byte and "--set" assignments, one
 * per line. vt_config_read_json, each vt_config_set and vt_resolve either fail with a
 * message or give a resolved config; a resolved config prints (vt_config_to_json) to JSON
 * that reads and resolves again and prints to the same text.
 */
#include "config.h"
#include "fuzz_util.h"
#include "resolve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    size_t json_len = strlen(text);
    vt_config c;
    vt_status s = vt_config_read_json(&c, text, "fuzz");
    if (s == VT_OK && json_len < size) { /* the assignments after the NUL */
        char *sets = text + json_len + 1;
        for (char *line = strtok(sets, "\n"); line && s == VT_OK; line = strtok(NULL, "\n"))
            s = vt_config_set(&c, line);
    }
    if (s == VT_OK) s = vt_resolve(&c);
    if (s != VT_OK) {
        FUZZ_CHECK(vt_last_error()[0] != '\0', "a rejected config without a message");
        free(text);
        return 0;
    }
    char *j1 = vt_config_to_json(&c);
    vt_config c2;
    s = vt_resolve_json(&c2, j1, "round trip");
    FUZZ_CHECK(s == VT_OK, "the printed config does not parse: %s\n%s", vt_last_error(), j1);
    char *j2 = vt_config_to_json(&c2);
    FUZZ_CHECK(strcmp(j1, j2) == 0, "print / re-parse / print differs:\n%s\n---\n%s", j1, j2);
    free(j1);
    free(j2);
    free(text);
    return 0;
}
