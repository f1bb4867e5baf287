/* Kernel names (symtab.c), keyed by the pointer a launch carries: registered at load time on
 * application threads, read by the writer and the kernel:RE step mode. */
#ifndef TKP_RECORD_SYMTAB_H
#define TKP_RECORD_SYMTAB_H

#include <stdint.h>

enum tkp_key_kind { TKP_KEY_HOSTFUN = 0, TKP_KEY_KERNEL = 1, TKP_KEY_FUNCTION = 2 };
/* Registration (runs in constructors, before capture starts: static storage only). */
void tkp_sym_register(const void *host_fun, const char *device_name);
/* __cudaGetKernel: a kernel handle stands for a host stub. */
void tkp_sym_alias(const void *kernel, const void *host_fun);
/* Writer / slow paths: the kernel name behind a key, resolving through the driver when the
 * registration table does not know it. Returns a string valid for the process lifetime, or NULL. */
const char *tkp_sym_name(uint64_t key, int key_kind);
/* kernel:RE step mode, per launch: match(the kernel's name, NULL when unknown), asked once per
 * key and TOKPROF_STEP regex (tkp_cfg.step_re_gen) and kept beside the name (a relaxed atomic
 * word: no lock, where glibc's regexec takes one). */
int tkp_sym_matches(uint64_t key, int key_kind, int (*match)(const char *name));

#endif
