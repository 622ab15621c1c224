/* json_nul.c - the escaped-NUL scan of a JSON text (contract in json_nul.h). */
#include "json_nul.h"

#include <string.h>

long vt_json_escaped_nul(const char *text, size_t len) {
    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] != '\\') continue;
        if (text[i + 1] == 'u' && i + 6 <= len && memcmp(text + i + 2, "0000", 4) == 0)
            return (long)i;
        i++; /* the escaped character: a backslash here does not start another escape */
    }
    return -1;
}
