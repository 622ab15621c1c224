/* config_overrides.h - test helper: a vt_config from a JSON text plus ';'-separated
 * "section.key=value" overrides (as --set takes them), validated. Aborts with the config
 * error on any bad input: a test's own configs must be valid; sets_have_kind. Header-only. */
#ifndef VT_TEST_CONFIG_OVERRIDES_H
#define VT_TEST_CONFIG_OVERRIDES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "pe/kinds.h"
#include "resolve.h"
#include "status.h"

static inline vt_config config_with_sets(const char *json, const char *sets) {
    vt_config c;
    if (vt_resolve_json(&c, json, "test") != VT_OK) {
        fprintf(stderr, "config %s: %s\n", json, vt_last_error());
        abort();
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", sets);
    for (char *tok = strtok(buf, ";"); tok; tok = strtok(NULL, ";"))
        if (vt_config_set(&c, tok) != VT_OK) {
            fprintf(stderr, "config set %s: %s\n", tok, vt_last_error());
            abort();
        }
    if (vt_resolve(&c) != VT_OK) {
        fprintf(stderr, "config %s: %s\n", sets, vt_last_error());
        abort();
    }
    return c;
}

/* 1 if the ';'-separated overrides `sets` contain "pe.kind=<name of k>" (lists of cases use
 * it to check that every kind of the registry has one). */
static inline int sets_have_kind(const char *sets, vt_pe_kind k) {
    char want[64];
    snprintf(want, sizeof want, "pe.kind=%s", vt_pe_kind_name(k));
    size_t n = strlen(want);
    for (const char *p = sets; (p = strstr(p, want)); p += n)
        if ((p == sets || p[-1] == ';') && (p[n] == ';' || p[n] == '\0')) return 1;
    return 0;
}

#endif
