/* tokprof decoder: kernel classes — which family of work a kernel name belongs to (attention,
 * gemm, moe, ...), decided once per distinct name by ordered regex rules.
 *
 *     struct tkp_classes *c;
 *     int err = tkp_classes_new(path_or_NULL, &c, why, sizeof why);  // user rules, then built-ins
 *     int cls = tkp_classes_match(c, "_Z15rms_norm_kernelILi256EEvP13__nv_bfloat16PKfS3_i");
 *     tkp_class_str(cls);                                            // "norm"
 *     tkp_classes_free(c);
 *
 * Matching (classes.c has the rule table and why it is ordered as it is): user rules (`--classes
 * FILE`) are tried first, in file order, against the kernel's base name and then its full name;
 * then the built-in rules against the base name; then the built-in rules against the full name
 * (template arguments carry the family for names like cutlass::device_kernel<flash::...>); then
 * the generic "elementwise" rules (ATen's TensorIterator kernels, reductions, indexing, Triton's
 * fused kernels) against both, last, so a silu or rsqrt functor inside an elementwise kernel
 * keeps its family; else "other". The base name is a light demangling (tkp_kernel_base_name). Regexes are POSIX ERE,
 * case-insensitive, searched anywhere in the name. */
#ifndef TKP_CLASSES_H
#define TKP_CLASSES_H

#include <stddef.h>

/* The built-in classes; user rules may name these or new ones (up to TKP_CLASSES_MAX in all). */
enum tkp_class {
    TKP_CLASS_ATTENTION,
    TKP_CLASS_GEMM,
    TKP_CLASS_MOE,
    TKP_CLASS_NORM,
    TKP_CLASS_ACTIVATION,
    TKP_CLASS_ROPE,
    TKP_CLASS_KVCACHE,
    TKP_CLASS_SAMPLING,
    TKP_CLASS_COMM,
    TKP_CLASS_COPY,
    TKP_CLASS_EMBEDDING,
    TKP_CLASS_ELEMENTWISE,
    TKP_CLASS_OTHER,
    TKP_CLASS_BUILTIN /* count of the built-ins; user-defined classes follow */
};

#define TKP_CLASSES_MAX 32       /* built-ins plus user-defined class names */
#define TKP_CLASS_NAME_MAX 32    /* bytes of a class name, NUL included */
#define TKP_CLASS_RULES_MAX 256  /* user rules in one file */

struct tkp_classes;

/* Builds the rule set: the built-ins, preceded by the rules of `path` when not NULL. A rules file
 * has one `CLASS REGEX` per line; blank lines and lines starting with '#' are skipped. Returns 0,
 * TKP_ERR_IO (unreadable file), TKP_ERR_USAGE (a bad line or regex: "FILE:LINE: reason" in why)
 * or TKP_ERR_NOMEM. */
int tkp_classes_new(const char *path, struct tkp_classes **out, char *why, size_t whylen);
void tkp_classes_free(struct tkp_classes *c); /* accepts NULL */

/* The class of a kernel name (never fails: "other" when nothing matches). */
int tkp_classes_match(const struct tkp_classes *c, const char *name);

/* How many classes exist (built-ins plus user-defined): valid ids are 0 .. count-1. */
int tkp_classes_count(const struct tkp_classes *c);
/* A class id's name ("attention", ..., or a user class); "?" for an invalid id. Owned by c. */
const char *tkp_classes_name(const struct tkp_classes *c, int cls);
/* The id of a class name, or -1 (for `--class C` filters). */
int tkp_classes_find(const struct tkp_classes *c, const char *name);

/* The base name of a kernel, for matching and display: for an Itanium-mangled `_Z<len><name>...`
 * its <name>; for a nested `_ZN<len><a><len><b>...E...` the last component before template
 * arguments (`_ZN4vllm15rms_norm_kernelI...` -> "rms_norm_kernel"); a demangled C++ name
 * (`vllm::act_and_mul_kernel<...>`) loses its namespaces and template arguments the same way;
 * anything else is copied. Writes at most n bytes (n > 0, NUL included) and returns buf. */
char *tkp_kernel_base_name(const char *name, char *buf, size_t n);

#endif
