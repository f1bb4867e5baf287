/* tokprof decoder: small JSON writing helpers for the --json views. Output is always valid
 * JSON (RFC 8259) whatever bytes the capture holds: invalid UTF-8 becomes U+FFFD. */
#ifndef TKP_JSON_H
#define TKP_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Writes s as a quoted, escaped JSON string; NULL writes null. */
void tkp_json_str(FILE *f, const char *s);
/* The same for n bytes that need not be NUL-terminated. */
void tkp_json_strn(FILE *f, const char *s, size_t n);
/* A handle as a JSON string "0x..." (handles are pointers: hex is how people compare them). */
void tkp_json_hex(FILE *f, uint64_t v);
/* One msgpack object (at most TKP_MP_MAX_DEPTH deep) as JSON: bin as a hex string, ext and
 * non-finite floats as null, non-string map keys as their JSON text in a string. Returns 0, or
 * TKP_ERR_RECORD if the bytes are not one well-formed object (output then incomplete). */
int tkp_json_msgpack(FILE *f, const uint8_t *p, size_t n);
/* The members of a msgpack map, without the braces, each preceded by ",": lets a caller merge
 * a map into an object it is writing. Keys named in skip (NULL-terminated list) are left out. */
int tkp_json_msgpack_members(FILE *f, const uint8_t *p, size_t n, const char *const *skip);

#endif
