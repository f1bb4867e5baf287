/* The shim's bottom floor: macros every file may use. Nothing here is exported: the only exported
 * symbols are the interposed entry points, marked TKP_EXPORT (see shim/exports.txt). */
#ifndef TKP_CORE_BASE_H
#define TKP_CORE_BASE_H

#define TKP_EXPORT __attribute__((visibility("default")))
#define TKP_LIKELY(x) __builtin_expect(!!(x), 1)
#define TKP_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* The dlsym interposer's path (hooks/dlsym.S -> tkp_dlsym_hook -> tkp_real_dlsym): it can run
 * before any constructor, the ASan or TSan runtime's included (their interceptors are set up with
 * dlsym), when there is no shadow memory or thread state yet. Not instrumented by either in the
 * sanitizer builds; no effect otherwise. */
#define TKP_EARLY __attribute__((no_sanitize_address, no_sanitize_thread))

#endif
