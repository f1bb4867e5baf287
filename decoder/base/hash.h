/* tokprof decoder: the one hash of the decoder's open-addressing tables (name ids, (thread, step)
 * keys, stack keys) and of names hashed for colour. The tables index arrays kept in insertion
 * order, so no output depends on where a key lands: only the probe lengths do. */
#ifndef TKP_HASH_H
#define TKP_HASH_H

#include <stdint.h>

/* A 64-bit key's hash (half of MurmurHash3's finaliser): the low bits, which a power-of-two
 * table takes, depend on every bit of the key. */
static inline uint64_t tkp_hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* A pair of keys (thread and step, stack and frame...): the first spread by the golden ratio
 * first, so (a, b) and (b, a) differ. */
static inline uint64_t tkp_hash_pair(uint64_t a, uint64_t b)
{
    return tkp_hash_u64(a * 0x9e3779b97f4a7c15ull ^ b);
}

/* A string's 32-bit FNV-1a hash: stable across runs and machines (colours derived from names). */
static inline uint32_t tkp_hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

#endif
