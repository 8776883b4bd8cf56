/* faid_thread: thread names (see faid_thread.h). */
#define _GNU_SOURCE
#include "faid_thread.h"

#include <stdarg.h>
#include <stdio.h>

void faid_thread_name(pthread_t t, const char *fmt, ...)
{
    char name[16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    (void)pthread_setname_np(t, name);
}
