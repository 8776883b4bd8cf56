/* faid_fan_proto: encoder and decoder of the fan-out link (faid_fan_proto.h). */
#include "faid_fan_proto.h"

#include "faid_proto.h"
#include "faid_proto_keys.h"

#include <stdio.h>
#include <string.h>

static const char *const type_names[] = {"",        "hello",  "credit", "bye", "welcome",
                                         "refused", "rejoin", "route",  "beat"};
static const char *const kind_names[] = {"other", "start", "image", "end"};

const char *faid_fan_type_name(faid_fan_type t)
{
    return (unsigned)t < sizeof(type_names) / sizeof(type_names[0]) ? type_names[t] : "";
}

const char *faid_fan_kind_name(faid_fan_kind k)
{
    return (unsigned)k < sizeof(kind_names) / sizeof(kind_names[0]) ? kind_names[k] : "other";
}

static void kv_uint(faid_mpw *w, const char *k, uint64_t v)
{
    faid_mpw_key(w, k);
    faid_mpw_uint(w, v);
}

int faid_fan_encode(const faid_fan_msg *m, void *buf, size_t cap, size_t *len, faid_diag *d)
{
    if (m->type <= FAID_FAN_NONE || m->type > FAID_FAN_BEAT)
        return faid_fail(d, FAID_EINVAL, "fan link: no message type %d", (int)m->type);
    faid_mpw w;
    faid_mpw_init(&w, buf, cap);
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, FAID_K_TYPE);
    faid_mpw_key(&w, type_names[m->type]);
    switch (m->type) {
    case FAID_FAN_HELLO:
        faid_mpw_key(&w, FAID_K_INSTANCE);
        faid_mpw_str(&w, m->instance);
        faid_mpw_key(&w, FAID_K_CONFIG_HASH);
        faid_mpw_str(&w, m->config_hash);
        /* fallthrough */
    case FAID_FAN_CREDIT:
    case FAID_FAN_BYE:
        kv_uint(&w, FAID_K_WINDOW, m->window);
        kv_uint(&w, FAID_K_DONE, m->done);
        if (m->type != FAID_FAN_HELLO && m->config_hash[0]) {
            faid_mpw_key(&w, FAID_K_CONFIG_HASH);
            faid_mpw_str(&w, m->config_hash);
        }
        if (m->type != FAID_FAN_HELLO && m->has_accounted) {
            if (m->naccounted > FAID_FAN_ACCOUNTED_MAX)
                return faid_fail(d, FAID_ESIZE, "fan link: %u accounted ranges (at most %d)",
                                 m->naccounted, FAID_FAN_ACCOUNTED_MAX);
            faid_mpw_key(&w, FAID_K_ACCOUNTED);
            faid_mpw_array(&w, m->naccounted);
            for (uint32_t k = 0; k < m->naccounted; k++) {
                faid_mpw_array(&w, 3);
                for (int j = 0; j < 3; j++)
                    faid_mpw_uint(&w, m->accounted[k][j]);
            }
        }
        break;
    case FAID_FAN_WELCOME:
        faid_mpw_key(&w, FAID_K_FLAGGED);
        faid_mpw_bool(&w, m->flagged);
        break;
    case FAID_FAN_REFUSED:
        faid_mpw_key(&w, FAID_K_ERROR);
        faid_mpw_str(&w, m->error);
        break;
    case FAID_FAN_ROUTE:
        faid_mpw_key(&w, FAID_K_PROTOCOL);
        faid_mpw_str(&w, m->protocol);
        faid_mpw_key(&w, FAID_K_KIND);
        faid_mpw_key(&w, faid_fan_kind_name(m->kind));
        kv_uint(&w, FAID_K_SERIES_ID, m->series_id);
        if (m->has_frame_id)
            kv_uint(&w, FAID_K_FRAME_ID, m->frame_id);
        kv_uint(&w, FAID_K_SHARD, m->shard);
        kv_uint(&w, FAID_K_SHARDS, m->shards);
        break;
    default:
        break;
    }
    faid_mpw_map_end(&w);
    int rc = faid_mpw_finish(&w, d);
    if (rc)
        return rc;
    *len = w.len;
    return 0;
}

static int get_u64(const faid_mp_obj *v, const char *key, uint64_t *out, faid_diag *d)
{
    if (faid_mp_to_u64(v, out))
        return faid_fail(d, FAID_EFORMAT, "fan link: %s is not an unsigned integer", key);
    return 0;
}

static int get_str(const faid_mp_obj *v, const char *key, char *out, size_t cap, faid_diag *d)
{
    if (v->type != FAID_MP_STR)
        return faid_fail(d, FAID_EFORMAT, "fan link: %s is not a str", key);
    if (!faid_utf8_valid(v->ptr, v->len) || memchr(v->ptr, 0, v->len))
        return faid_fail(d, FAID_EFORMAT, "fan link: %s is not valid UTF-8 text", key);
    if (faid_mp_to_cstr(v, out, cap))
        return faid_fail(d, FAID_ESIZE, "fan link: %s of %u bytes (at most %zu)", key, v->len,
                         cap - 1);
    return 0;
}

/* accounted: at most FAID_FAN_ACCOUNTED_MAX [series, first, last] ranges, first <= last (a
 * range costs its reader one comparison per outstanding frame, whatever its span). */
static int get_accounted(faid_mpr *r, const faid_mp_obj *v, faid_fan_msg *m, faid_diag *d)
{
    if (v->type != FAID_MP_ARRAY)
        return faid_fail(d, FAID_EFORMAT, "fan link: accounted is not an array");
    if (v->len > FAID_FAN_ACCOUNTED_MAX)
        return faid_fail(d, FAID_ESIZE, "fan link: accounted has %u ranges (at most %d)", v->len,
                         FAID_FAN_ACCOUNTED_MAX);
    m->has_accounted = 1;
    m->naccounted = v->len;
    for (uint32_t k = 0; k < v->len; k++) {
        faid_mp_obj e, x;
        int rc = faid_mpr_next(r, &e, d);
        if (rc)
            return rc;
        if (e.type != FAID_MP_ARRAY || e.len != 3)
            return faid_fail(d, FAID_EFORMAT,
                             "fan link: accounted[%u] is not [series_id, first, last]", k);
        for (int j = 0; j < 3; j++) {
            if ((rc = faid_mpr_next(r, &x, d)))
                return rc;
            if (faid_mp_to_u64(&x, &m->accounted[k][j]))
                return faid_fail(d, FAID_EFORMAT,
                                 "fan link: accounted[%u][%d] is not an unsigned integer", k, j);
        }
        if (m->accounted[k][2] < m->accounted[k][1])
            return faid_fail(d, FAID_EFORMAT, "fan link: accounted[%u] ends before it begins", k);
    }
    return 0;
}

int faid_fan_decode(const void *buf, size_t len, faid_fan_msg *m, faid_diag *d)
{
    memset(m, 0, sizeof(*m));
    faid_mpr r;
    faid_mpr_init(&r, buf, len);
    faid_mp_obj o;
    int rc = faid_mpr_next(&r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_MAP)
        return faid_fail(d, FAID_EFORMAT, "fan link: the message is not a msgpack map");
    uint32_t pairs = o.len;
    char type[16] = "", kind[16] = "";
    int have_kind = 0, have_series = 0;
    for (uint32_t i = 0; i < pairs; i++) {
        faid_mp_obj k, v;
        if ((rc = faid_mpr_next(&r, &k, d)))
            return rc;
        if (k.type != FAID_MP_STR)
            return faid_fail(d, FAID_EFORMAT, "fan link: key %u is not a str", i);
        faid_key key = faid_key_lookup(k.ptr, k.len);
        /* values that are containers are skipped whole: no key of the link has one */
        faid_mpr at = r;
        if ((rc = faid_mpr_next(&at, &v, d)))
            return rc;
        if (key == FAID_KEY_ACCOUNTED) {
            r = at;
            if ((rc = get_accounted(&r, &v, m, d)))
                return rc;
            continue;
        }
        if (v.type == FAID_MP_ARRAY || v.type == FAID_MP_MAP) {
            if ((rc = faid_mpr_skip(&r, d)))
                return rc;
            if (key == FAID_KEY_TYPE || key == FAID_KEY_INSTANCE || key == FAID_KEY_WINDOW ||
                key == FAID_KEY_DONE || key == FAID_KEY_SERIES_ID || key == FAID_KEY_FRAME_ID)
                return faid_fail(d, FAID_EFORMAT, "fan link: %.*s is a container", (int)k.len,
                                 (const char *)k.ptr);
            continue;
        }
        r = at;
        switch (key) {
        case FAID_KEY_TYPE:
            rc = get_str(&v, FAID_K_TYPE, type, sizeof(type), d);
            break;
        case FAID_KEY_INSTANCE:
            rc = get_str(&v, FAID_K_INSTANCE, m->instance, sizeof(m->instance), d);
            break;
        case FAID_KEY_CONFIG_HASH:
            rc = get_str(&v, FAID_K_CONFIG_HASH, m->config_hash, sizeof(m->config_hash), d);
            break;
        case FAID_KEY_WINDOW:
            rc = get_u64(&v, FAID_K_WINDOW, &m->window, d);
            break;
        case FAID_KEY_DONE:
            rc = get_u64(&v, FAID_K_DONE, &m->done, d);
            break;
        case FAID_KEY_FLAGGED:
            if (v.type != FAID_MP_BOOL)
                return faid_fail(d, FAID_EFORMAT, "fan link: flagged is not a bool");
            m->flagged = v.b;
            break;
        case FAID_KEY_ERROR:
            rc = get_str(&v, FAID_K_ERROR, m->error, sizeof(m->error), d);
            break;
        case FAID_KEY_PROTOCOL:
            rc = get_str(&v, FAID_K_PROTOCOL, m->protocol, sizeof(m->protocol), d);
            break;
        case FAID_KEY_KIND:
            rc = get_str(&v, FAID_K_KIND, kind, sizeof(kind), d);
            have_kind = 1;
            break;
        case FAID_KEY_SERIES_ID:
            rc = get_u64(&v, FAID_K_SERIES_ID, &m->series_id, d);
            have_series = 1;
            break;
        case FAID_KEY_FRAME_ID:
            rc = get_u64(&v, FAID_K_FRAME_ID, &m->frame_id, d);
            m->has_frame_id = 1;
            break;
        case FAID_KEY_SHARD:
        case FAID_KEY_SHARDS: {
            uint64_t x = 0;
            rc = get_u64(&v, key == FAID_KEY_SHARD ? FAID_K_SHARD : FAID_K_SHARDS, &x, d);
            if (!rc && x > UINT32_MAX)
                rc = faid_fail(d, FAID_ERANGE, "fan link: %s %llu is too large",
                               key == FAID_KEY_SHARD ? FAID_K_SHARD : FAID_K_SHARDS,
                               (unsigned long long)x);
            if (key == FAID_KEY_SHARD)
                m->shard = (uint32_t)x;
            else
                m->shards = (uint32_t)x;
            break;
        }
        default:
            break; /* a key this side does not know: a newer peer's */
        }
        if (rc)
            return rc;
    }
    if (!type[0])
        return faid_fail(d, FAID_EFORMAT, "fan link: the message has no type");
    for (int t = FAID_FAN_HELLO; t <= FAID_FAN_BEAT; t++)
        if (strcmp(type, type_names[t]) == 0)
            m->type = (faid_fan_type)t;
    if (m->type == FAID_FAN_NONE)
        return faid_fail(d, FAID_EPROTO, "fan link: unknown message type \"%s\"", type);
    if (m->type == FAID_FAN_HELLO && !m->instance[0])
        return faid_fail(d, FAID_EFORMAT, "fan link: hello without instance");
    if (m->type == FAID_FAN_ROUTE) {
        if (!have_kind || !have_series)
            return faid_fail(d, FAID_EFORMAT, "fan link: route without %s",
                             have_kind ? "series_id" : "kind");
        m->kind = FAID_FAN_KIND_OTHER;
        for (int k = FAID_FAN_KIND_START; k <= FAID_FAN_KIND_END; k++)
            if (strcmp(kind, kind_names[k]) == 0)
                m->kind = (faid_fan_kind)k;
        if (m->kind == FAID_FAN_KIND_IMAGE && !m->has_frame_id)
            return faid_fail(d, FAID_EFORMAT, "fan link: route of an image without frame_id");
    }
    return 0;
}
