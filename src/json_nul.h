/* json_nul.h - finding an escaped NUL (\u0000) inside the strings of a JSON text.
 *
 * cJSON decodes "\u0000" into a NUL byte and hands back C strings, which then end there:
 * "head.bias\u0000evil" would read as "head.bias", "runs/a\u0000b" as "runs/a". No name,
 * key or value vitrain reads may hold a NUL, so the texts it parses (configs, safetensors
 * headers) are scanned first and such an escape is an error at its offset.
 *
 * Owns: that scan. Does not own: parsing (cJSON) or the message, which names the file.
 */
#ifndef VT_JSON_NUL_H
#define VT_JSON_NUL_H

#include <stddef.h>

/* Byte offset in text[0..len) of the first "\u0000" escape, or -1 if there is none. A
 * backslash outside a string is invalid JSON whatever follows, so every backslash starts
 * an escape and the scan needs no string state: "\\u0000" is an escaped backslash and
 * the text "u0000", not a NUL. */
long vt_json_escaped_nul(const char *text, size_t len);

#endif
