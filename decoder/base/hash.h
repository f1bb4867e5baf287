/* tokprof decoder: the hashes of the decoder: of its open-addressing tables (map.h: name ids,
 * (thread, step) keys, stack keys, strings), of names hashed for colour, and FNV-1a 64 for ids
 * that must be the same on every machine. The only place hash constants are written (tests/arch
 * check_hashes.py). The tables index arrays kept in insertion
 * order, so no output depends on where a key lands: only the probe lengths do. */
#ifndef TKP_HASH_H
#define TKP_HASH_H

#include <stddef.h>
#include <stdint.h>

/* A 64-bit key's hash (half of MurmurHash3's finaliser): the low bits, which a power-of-two
 * table takes, depend on every bit of the key. */
static inline uint64_t tkp_mix64(uint64_t x)
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
    return tkp_mix64(a * 0x9e3779b97f4a7c15ull ^ b);
}

/* The top `bits` (1..63) bits of a key times the golden ratio (Fibonacci hashing): the slot of a
 * small direct-mapped cache in two instructions, every bit of the key moving the top ones. */
static inline uint32_t tkp_hash_fib(uint64_t x, unsigned bits)
{
    return (uint32_t)((x * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* FNV-1a 64 of n bytes, continuing from h (TKP_FNV64_SEED to start): stable across runs and
 * machines, for what is kept or compared outside one process (capture ids, file identities). */
#define TKP_FNV64_SEED 0xcbf29ce484222325ull
static inline uint64_t tkp_fnv64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
/* The same of a string's bytes (without its NUL). */
static inline uint64_t tkp_fnv64_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
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
