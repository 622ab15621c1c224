/* e2e_kinds.c - `vitrain kinds`, the listing the scripts take their kind lists from, through
 * the built binary ($VT_BIN, default ./vitrain): every pe.kind of the registry in its
 * order, --rotary exactly the kinds whose entry is rotary, --data every data.kind, and the
 * usage errors (exit 2, the option named) for a value given to a switch, a stray argument
 * and --rotary with --data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"

#include "data/formats.h"
#include "pe/kinds.h"

static char bin[1024], out[256], err[256];

/* `vitrain kinds ARGS` exits 0 printing exactly want. */
static void expect_lines(const char *args, const char *want) {
    int rc = run("%s kinds %s >%s 2>%s", bin, args, out, err);
    char *got = test_read_file(out, NULL);
    CHECK(rc == 0 && got && strcmp(got, want) == 0, "'vitrain kinds %s' exits 0 (got %d) listing\n%s--- got\n%s",
          args, rc, want, got ? got : "(none)");
    free(got);
}

int main(void) {
    e2e_bin(bin, sizeof bin);
    snprintf(out, sizeof out, "/tmp/vt_e2e_kinds_%d.out", (int)getpid());
    snprintf(err, sizeof err, "/tmp/vt_e2e_kinds_%d.err", (int)getpid());
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "vitrain binary %s not found (set VT_BIN)\n", bin);
        CHECK(0, "binary present");
        return test_summary();
    }
    char all[1024] = "", rotary[1024] = "", data[1024] = "";
    int n_rotary = 0;
    for (int k = 0; k < VT_PE_KIND_COUNT; k++) {
        const char *name = vt_pe_kind_name((vt_pe_kind)k);
        snprintf(all + strlen(all), sizeof all - strlen(all), "%s\n", name);
        if (vt_pe_kind_entry((vt_pe_kind)k)->rotary) {
            snprintf(rotary + strlen(rotary), sizeof rotary - strlen(rotary), "%s\n", name);
            n_rotary++;
        }
    }
    for (int k = 0; k < VT_DATA_KIND_COUNT; k++)
        snprintf(data + strlen(data), sizeof data - strlen(data), "%s\n", vt_data_kind_name((vt_data_kind)k));
    CHECK(n_rotary > 0 && n_rotary < VT_PE_KIND_COUNT, "the registry has rotary and other kinds (%d of %d rotary)",
          n_rotary, VT_PE_KIND_COUNT);
    CHECK(strstr(rotary, "rope_mixed\n") && !strstr(rotary, "ape\n"), "rope_mixed is rotary, ape is not");
    expect_lines("", all);
    expect_lines("--rotary", rotary);
    expect_lines("--data", data);

    static const struct { const char *args, *needle; } bad[] = {
        {"--rotary=1", "--rotary takes no value"},
        {"rope", "unexpected argument 'rope'"},
        {"--rotary --data", "--rotary"},
        {"--markdown", "unknown option '--markdown'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run("%s kinds %s >%s 2>%s", bin, bad[i].args, out, err);
        CHECK(rc == 2, "'vitrain kinds %s' exits 2, got %d", bad[i].args, rc);
        CHECK(file_contains(err, bad[i].needle) && file_contains(err, "vitrain kinds --help lists the options"),
              "'vitrain kinds %s' names '%s' and points at --help", bad[i].args, bad[i].needle);
    }
    int rc = run("%s kinds --help >%s 2>%s", bin, out, err);
    CHECK(rc == 0 && file_contains(out, "--rotary"), "kinds --help exits 0 with its usage");
    unlink(out);
    unlink(err);
    return test_summary();
}
