/* faid_thread: names for the daemon's threads, so that `top -H`, `ps -L`, gdb and the
 * benchmarks' per-thread CPU figures (tests/bench/daemon-bench.sh) say which is which. */
#ifndef FAID_THREAD_H
#define FAID_THREAD_H

#include <pthread.h>

/* Names thread t (printf-style; the kernel keeps 15 characters, the rest is cut). A failure
 * costs only the name. */
void faid_thread_name(pthread_t t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
