/* faid_notify: systemd's service notification protocol (sd_notify, libsystemd) for a
 * Type=notify unit: READY=1 once the pipeline runs, STATUS= lines with the counters, STOPPING=1
 * when the drain begins, and WATCHDOG=1 every half WatchdogSec, sent only while every pipeline
 * thread (ingest, each worker, publisher) has turned its loop within that half period, so a
 * wedged faid is restarted by systemd. Without systemd (no NOTIFY_SOCKET) every call does
 * nothing. Main thread only. */
#ifndef FAID_NOTIFY_H
#define FAID_NOTIFY_H

#include <stdint.h>

struct faid_server;

/* Reads WATCHDOG_USEC (sd_watchdog_enabled); returns the period to call tick at in ms (at most
 * max_ms). */
int faid_notify_init(int max_ms);
void faid_notify_ready(struct faid_server *s);
void faid_notify_stopping(void);
/* Called from the main loop: watchdog ping (when due and every thread is alive) and STATUS. */
void faid_notify_tick(struct faid_server *s);

#endif
