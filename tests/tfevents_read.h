/* tfevents_read.h - test helpers reading event files back (header-only): the steps of
 * one file's records, and the event files of a run directory in name order.
 */
#ifndef VT_TFEVENTS_READ_H
#define VT_TFEVENTS_READ_H

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"
#include "tfevents.h"

/* Records of one event file: their steps into steps[] (up to max), the count returned;
 * *clean: the file ended at a record's end; *session_start (may be NULL): the index of
 * the first SessionLog START record (its Event ends in field 7 = {status 1}), -1 if none. */
static int file_steps(const char *path, int64_t *steps, int max, int *clean, int *session_start) {
    size_t len;
    char *b = test_read_file(path, &len);
    int k = 0, r = -1;
    if (session_start) *session_start = -1;
    if (b) {
        size_t pos = 0, dn;
        const uint8_t *d;
        while (k < max && (r = vt_tfevents_next((uint8_t *)b, len, &pos, &d, &dn)) == 1) {
            if (session_start && *session_start < 0 && dn >= 4 && !memcmp(d + dn - 4, "\x3a\x02\x08\x01", 4))
                *session_start = k;
            steps[k++] = vt_tfevents_event_step(d, dn);
        }
    }
    *clean = r == 0;
    free(b);
    return k;
}

/* Names of the event files in dir, sorted (at most 4). */
static int event_files(const char *dir, char names[][256]) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 4)
        if (!strncmp(e->d_name, "events.out.tfevents.", 20)) snprintf(names[n++], 256, "%s", e->d_name);
    if (d) closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char t[256];
                memcpy(t, names[i], 256);
                memcpy(names[i], names[j], 256);
                memcpy(names[j], t, 256);
            }
    return n;
}

#endif
