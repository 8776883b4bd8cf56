/* faid_queue: a bounded FIFO of pointers between threads (mutex + two condition variables).
 * The capacity is fixed at creation, so pushing never allocates. Every queue of the daemon is one
 * of these: the free-slot pool, the frame queue (ingest -> workers) and the result queue
 * (ingest, workers -> publisher). Closing a queue refuses further pushes and lets consumers drain
 * what is left, then tells them FAID_ESTOPPED: that is how shutdown travels down the pipeline.
 *
 * Timeouts are in milliseconds: -1 waits forever, 0 does not wait. */
#ifndef FAID_QUEUE_H
#define FAID_QUEUE_H

#include <stddef.h>

typedef struct faid_queue faid_queue;

/* NULL when cap is 0 or memory is short. */
faid_queue *faid_queue_new(size_t cap);
void faid_queue_destroy(faid_queue **q);

/* 0; FAID_ETIMEOUT when still full after timeout_ms; FAID_ESTOPPED when the queue is closed. */
int faid_queue_push(faid_queue *q, void *item, int timeout_ms);
/* 0; FAID_ETIMEOUT when still empty after timeout_ms; FAID_ESTOPPED when closed and empty. */
int faid_queue_pop(faid_queue *q, void **item, int timeout_ms);
/* Pushes item; when the queue is full, first removes the oldest item into *evicted (else
 * *evicted = NULL). Never waits. FAID_ESTOPPED when closed. */
int faid_queue_push_evict(faid_queue *q, void *item, void **evicted);

void faid_queue_close(faid_queue *q);
size_t faid_queue_len(faid_queue *q);
size_t faid_queue_cap(const faid_queue *q);

#endif
