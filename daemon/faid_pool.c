/* faid_pool: the frame slots and series event records that travel through the pipeline's
 * queues. See faid_pool.h. */
#include "faid_pool.h"

#include "faid_state.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------- */
/* Slots                                                                                         */

faid_slot *faid_slot_get(faid_server *s, int timeout_ms)
{
    void *p = NULL;
    if (faid_queue_pop(s->pool, &p, timeout_ms))
        return NULL;
    faid_slot *slot = p;
    slot->kind = FAID_SLOT_FREE;
    slot->counted = 0;
    slot->series_seq = 0;
    slot->has_frame_id = 0;
    slot->err_msg[0] = '\0';
    slot->err_code = 0;
    slot->err_stage = NULL;
    slot->out_len = 0;
    slot->series_uid[0] = '\0';
    slot->device = -1;
    slot->has_table = 0;
    slot->table_us = 0.0;
    memset(&slot->h, 0, sizeof(slot->h));
    return slot;
}

faid_event *faid_event_get(faid_server *s, int timeout_ms)
{
    void *p = NULL;
    if (faid_queue_pop(s->event_pool, &p, timeout_ms))
        return NULL;
    faid_event *e = p;
    e->kind = FAID_ITEM_EVENT;
    memset(&e->ev, 0, sizeof(e->ev));
    e->user_data_len = 0;
    e->setup = FAID_SETUP_REUSED;
    e->build_ms = 0;
    return e;
}

void faid_event_put(faid_server *s, faid_event *e)
{
    faid_gen_release(&e->gen);
    faid_gen_job_release(&e->build);
    e->user_data_len = 0;
    /* The pool's capacity is the number of records: this never waits. */
    faid_queue_push(s->event_pool, e, -1);
}

void faid_slot_release_parts(faid_slot *slot)
{
    if (slot->pin) {
        faid_pinned_free(slot->pin_arena, slot->pin);
        slot->pin = NULL;
    }
    for (int k = 0; k < slot->nkept; k++)
        zmq_msg_close(&slot->part[k]);
    slot->nkept = 0;
    slot->payload = NULL;
    slot->payload_len = 0;
    slot->h.user_data = NULL;
    slot->h.user_data_len = 0;
}

void faid_slot_clear_frame(faid_slot *slot)
{
    faid_slot_release_parts(slot);
    faid_gen_release(&slot->gen);
    faid_gen_job_release(&slot->build);
}

void faid_slot_put(faid_server *s, faid_slot *slot)
{
    faid_slot_clear_frame(slot);
    slot->kind = FAID_SLOT_FREE;
    /* The pool's capacity is the number of slots: this never waits. */
    faid_queue_push(s->pool, slot, -1);
}

int faid_slot_reserve(faid_slot *slot, size_t n)
{
    if (slot->out_cap >= n)
        return 0;
    uint8_t *p = realloc(slot->out, n);
    if (!p)
        return FAID_ENOMEM;
    slot->out = p;
    slot->out_cap = n;
    return 0;
}

uint32_t faid_slot_table_blocks(const faid_setup *su)
{
    return faid_bslz4_max_blocks((uint64_t)su->rows * (uint64_t)su->cols * 4u, 1, 0);
}

int faid_slot_reserve_table(faid_slot *slot, uint32_t cap, faid_diag *d)
{
    if (slot->table.cap >= cap && slot->table.offset)
        return 0;
    faid_block_table_free(&slot->table);
    return faid_block_table_alloc(&slot->table, cap, d);
}
