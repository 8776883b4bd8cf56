/* faid_memstat: memory as the kernel and the allocator see it (see faid_memstat.h). */
#define _GNU_SOURCE
#include "faid_memstat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAID_SANITIZER_MALLOC 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FAID_SANITIZER_MALLOC 1
#endif

/* Under AddressSanitizer malloc is the sanitizer's, and its mallinfo2() answers zeros: the
 * allocator's figures are then reported as 0 ("not told"), like on a C library without it. */
#if defined(__GLIBC__) && !defined(FAID_SANITIZER_MALLOC)
#include <malloc.h>
#if __GLIBC_PREREQ(2, 33)
#define FAID_HAVE_MALLINFO2 1
#endif
#endif

/* VmRSS and RssAnon of /proc/self/status, in bytes. */
static void read_proc(faid_memstat *m)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
            m->rss_bytes = (uint64_t)kb * 1024;
        else if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
            m->rss_anon_bytes = (uint64_t)kb * 1024;
    }
    fclose(f);
}

#ifdef FAID_HAVE_MALLINFO2
/* The arenas: malloc_info() writes one <heap nr="N"> element per arena (glibc's only way to
 * count them). Its text is a few kB per arena. */
static uint64_t count_arenas(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return 0;
    int rc = malloc_info(0, f);
    fclose(f);
    uint64_t n = 0;
    if (rc == 0 && text)
        for (const char *p = text; (p = strstr(p, "<heap nr=")) != NULL; p++)
            n++;
    free(text);
    return n;
}
#endif

void faid_memstat_read(faid_memstat *m)
{
    memset(m, 0, sizeof *m);
    read_proc(m);
#ifdef FAID_HAVE_MALLINFO2
    struct mallinfo2 mi = mallinfo2();
    m->heap_bytes = (uint64_t)mi.arena;
    m->mmap_bytes = (uint64_t)mi.hblkhd;
    m->in_use_bytes = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
    m->free_bytes = (uint64_t)mi.fordblks;
    m->arenas = count_arenas();
#endif
}

size_t faid_malloc_fit(size_t per_frame_bytes)
{
#ifdef FAID_HAVE_MALLINFO2
    const size_t lo = (size_t)128 << 10, hi = (size_t)32 << 20, step = (size_t)64 << 10;
    size_t t = per_frame_bytes < lo ? lo : per_frame_bytes;
    t = t > hi ? hi : (t + step - 1) / step * step;
    /* mallopt answers 1 on success; a value it refuses leaves glibc's own policy. */
    if (mallopt(M_MMAP_THRESHOLD, (int)t) != 1)
        return 0;
    mallopt(M_TRIM_THRESHOLD, (int)(2 * t));
    return t;
#else
    (void)per_frame_bytes;
    return 0;
#endif
}
