/*
 * The dlsym override of liballot-cuda.so (docs/shim.md "How calls reach
 * the shim"): the real dlsym answers first (lookup.c finds it with
 * dlvsym, not through this override), and a hooked name it finds is
 * answered with the hook.
 *
 * Alone in its file on purpose: nothing else refers to it, so a program
 * that links the shim's parts statically (tests/shim/test_shim_units)
 * does not get the override, which would turn the sanitizer runtime's own
 * RTLD_NEXT lookups back onto itself. The shared library takes every part
 * (--whole-archive).
 *
 * Limit: dlsym(RTLD_NEXT, ...) is answered as if asked by the shim (the
 * real dlsym reads its caller's address), which finds the same objects
 * for a program but not for another preloaded interposer.
 */
/* _GNU_SOURCE comes from the build */
#include <dlfcn.h>

#include "shim.h"

/* ASan resolves its interceptors with dlsym before it has mapped its
 * shadow memory: this path must not be instrumented. */
__attribute__((no_sanitize("address"))) void *dlsym(void *restrict handle,
                                                    const char *restrict symbol)
{
    void *p = shim_dlsym(handle, symbol);

    return p ? shim_dlsym_answer(symbol, p) : NULL;
}
