/* tsan.h - ThreadSanitizer annotations (make check-thread).
 *
 * COLIBRI_TSAN is defined in a -fsanitize=thread build (gcc or clang); the
 * helpers below are empty in every other build. They tell TSan about an
 * ordering it cannot see because the kernel provides it, never to hide a
 * race on memory both sides reach without one. */
#pragma once

#if defined(__SANITIZE_THREAD__)
#define COLIBRI_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COLIBRI_TSAN 1
#endif
#endif

#ifdef COLIBRI_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* What happened before tsan_release(p) happens before what follows a later
 * tsan_acquire(p) in another thread. */
static inline void tsan_release(void *p)
{
#ifdef COLIBRI_TSAN
    __tsan_release(p);
#else
    (void)p;
#endif
}

static inline void tsan_acquire(void *p)
{
#ifdef COLIBRI_TSAN
    __tsan_acquire(p);
#else
    (void)p;
#endif
}
