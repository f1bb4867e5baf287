/* tokprof decoder: offline symbolisation of the host call stacks a capture holds (STACK and
 * MODULE records, docs/FORMAT.md "Stacks").
 *
 *     struct tkp_symbolizer *s = tkp_symbolizer_new(NULL);
 *     tkp_symbolizer_add_module(s, id, path, build_id, base, size);   // each MODULE record
 *     struct tkp_frame f;
 *     tkp_symbolize(s, pc, &f);          // f.function "gemm(Thr*, ...)", f.short_name "gemm"
 *     tkp_symbolizer_free(s);
 *
 * Each module's file is opened by its recorded path (under `root` when given: a copy of the
 * traced host's files), lazily, once; its build id is checked against the recorded one when both
 * exist; its ELF symbols (.symtab, else .dynsym; a /usr/lib/debug/.build-id/ file when the
 * module itself has no .symtab) are read once and kept sorted. A pc maps to the function symbol
 * that contains it, C++ names demangled (__cxa_demangle, linked statically). Nothing is printed:
 * modules that cannot be used are listed by tkp_symbolizer_problems(). */
#ifndef TKP_SYMBOLIZE_H
#define TKP_SYMBOLIZE_H

#include <stdint.h>
#include <stdio.h>

struct tkp_symbolizer;

/* What a pc resolves to. Strings are owned by the symbolizer, valid until tkp_symbolizer_free. */
struct tkp_frame {
    uint64_t pc;
    const char *module;     /* the module's file name without directories; NULL: no module */
    const char *path;       /* the module's recorded path; NULL: no module */
    const char *function;   /* demangled symbol; NULL: no symbol covers the pc */
    const char *short_name; /* function without parameters and return type ("gemm",
                               "launch<float>"); NULL when function is */
    uint64_t offset;        /* pc - symbol start, or pc - module base without a symbol */
};

/* root: a directory prefixed to every module path, or NULL. Returns NULL when out of memory. */
struct tkp_symbolizer *tkp_symbolizer_new(const char *root);
void tkp_symbolizer_free(struct tkp_symbolizer *s); /* accepts NULL */

/* A MODULE record. The same id again with the same values is a no-op (modules are repeated in
 * every chunk); with other values it replaces the module. Returns 0 or TKP_ERR_NOMEM. */
int tkp_symbolizer_add_module(struct tkp_symbolizer *s, uint64_t id, const char *path,
                              const char *build_id, uint64_t base, uint64_t size);

/* Resolves a return address as a stack holds it: the call instruction is at pc - 1, which is
 * what is looked up (a call that ends a function must not resolve to the next one). */
void tkp_symbolize(struct tkp_symbolizer *s, uint64_t pc, struct tkp_frame *out);

/* One line per module that was needed but could not be read ("PATH: build-id mismatch"), into
 * f; returns how many. */
int tkp_symbolizer_problems(const struct tkp_symbolizer *s, FILE *f);

/* A demangled (or plain) C/C++ name without its parameter list, qualifiers and return type:
 * "void launch<int>(Thr*, int) [clone .constprop.0]" -> "launch<int>". Writes at most n bytes
 * (NUL included) into buf and returns it. */
char *tkp_short_name(const char *name, char *buf, size_t n);

/* __cxa_demangle of an Itanium name ("_Z..."), else a copy; malloc'ed, NULL when out of memory. */
char *tkp_demangle(const char *name);

#endif
