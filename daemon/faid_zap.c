/* faid_zap: the ZAP handler that admits CURVE clients by their public key (see faid_zap.h). */
#include "faid_zap.h"
#include "faid_thread.h"

#include "faid_keyfile.h"
#include "faid_log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_POLL_MS  200 /* how soon the thread sees the stop flag */
#define ZAP_PARTS    8   /* a request has 6 parts + credentials (CURVE: 1) */

/* One authorized key and the file it came from; the set is sorted by key for a binary search
 * at each handshake. */
typedef struct zap_key {
    uint8_t key[32];
    char name[64];
} zap_key;

struct faid_zap_keys {
    size_t n;
    zap_key *k;
};

struct faid_zap {
    void *sock;
    pthread_t thread;
    int started;
    atomic_int stop;
    pthread_mutex_t mu;
    faid_zap_keys *keys; /* under mu */
    atomic_uint_fast64_t allowed, refused;
};

static faid_ratelimit rl_refused;

static int by_key(const void *a, const void *b)
{
    return memcmp(((const zap_key *)a)->key, ((const zap_key *)b)->key, 32);
}

faid_zap_keys *faid_zap_keys_load(const char *dir, faid_diag *d)
{
    char(*text)[FAID_Z85_KEY_LEN + 1] = NULL;
    char(*names)[64] = NULL;
    size_t n = 0;
    int rc = faid_keyfile_read_dir(dir, FAID_ZAP_MAX_KEYS, &text, &names, &n, d);
    faid_zap_keys *k = NULL;
    if (!rc) {
        k = calloc(1, sizeof(*k));
        if (k && n)
            k->k = calloc(n, sizeof(*k->k));
        if (!k || (n && !k->k))
            rc = faid_fail(d, FAID_ENOMEM, "out of memory for %zu keys", n);
    }
    for (size_t i = 0; i < n && !rc; i++) {
        if (!zmq_z85_decode(k->k[i].key, text[i]))
            rc = faid_fail(d, FAID_EFORMAT, "%s/%s: not a z85 key", dir, names[i]);
        memcpy(k->k[i].name, names[i], sizeof(k->k[i].name));
    }
    free(text);
    free(names);
    if (rc) {
        faid_diag_prefix(d, "security.authorized_keys: ");
        faid_zap_keys_destroy(&k);
        return NULL;
    }
    k->n = n;
    qsort(k->k, n, sizeof(*k->k), by_key);
    return k;
}

void faid_zap_keys_destroy(faid_zap_keys **pk)
{
    if (!pk || !*pk)
        return;
    free((*pk)->k);
    free(*pk);
    *pk = NULL;
}

size_t faid_zap_keys_count(const faid_zap_keys *k)
{
    return k ? k->n : 0;
}

/* The name of the authorized key equal to key, or NULL. Under z->mu. */
static const char *find_key(const faid_zap_keys *k, const uint8_t *key)
{
    if (!k || !k->n)
        return NULL;
    zap_key want;
    memcpy(want.key, key, 32);
    const zap_key *hit = bsearch(&want, k->k, k->n, sizeof(*k->k), by_key);
    return hit ? hit->name : NULL;
}

static void reply(void *sock, zmq_msg_t *version, zmq_msg_t *request_id, const char *status,
                  const char *text, const char *user)
{
    zmq_msg_send(version, sock, ZMQ_SNDMORE);
    zmq_msg_send(request_id, sock, ZMQ_SNDMORE);
    zmq_send(sock, status, strlen(status), ZMQ_SNDMORE);
    zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(sock, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(sock, "", 0, 0); /* metadata */
}

static void handle(faid_zap *z)
{
    zmq_msg_t part[ZAP_PARTS];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, z->sock, 0) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (n < ZAP_PARTS)
            part[n++] = m;
        else
            zmq_msg_close(&m);
    }
    /* [version, request id, domain, address, routing id, mechanism, credentials...] */
    if (n < 6) {
        /* Not a request libzmq would send: a REP must still answer to stay in step. */
        zmq_send(z->sock, "", 0, 0);
    } else {
        char addr[128] = "", mech[32] = "";
        size_t la =
            zmq_msg_size(&part[3]) < sizeof(addr) - 1 ? zmq_msg_size(&part[3]) : sizeof(addr) - 1;
        memcpy(addr, zmq_msg_data(&part[3]), la);
        size_t lm =
            zmq_msg_size(&part[5]) < sizeof(mech) - 1 ? zmq_msg_size(&part[5]) : sizeof(mech) - 1;
        memcpy(mech, zmq_msg_data(&part[5]), lm);
        const uint8_t *key = n >= 7 && zmq_msg_size(&part[6]) == 32 ? zmq_msg_data(&part[6]) : NULL;
        char name[64] = "";
        pthread_mutex_lock(&z->mu);
        const char *who = strcmp(mech, "CURVE") == 0 && key ? find_key(z->keys, key) : NULL;
        if (who)
            snprintf(name, sizeof(name), "%s", who);
        pthread_mutex_unlock(&z->mu);
        if (who) {
            atomic_fetch_add(&z->allowed, 1);
            FAID_DEBUG("security", "CURVE client %s from %s admitted", name, addr);
            reply(z->sock, &part[0], &part[1], "200", "OK", name);
        } else {
            atomic_fetch_add(&z->refused, 1);
            char z85[FAID_Z85_KEY_LEN + 1] = "(none)";
            if (key)
                zmq_z85_encode(z85, key, 32);
            faid_log_ratelimited(&rl_refused, FAID_LOG_WARN, "security",
                                 "refused a %s client from %s: public key %s is not in "
                                 "security.authorized_keys",
                                 mech[0] ? mech : "?", addr[0] ? addr : "?", z85);
            reply(z->sock, &part[0], &part[1], "400", "key not authorized", "");
        }
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&part[i]);
}

static void *zap_main(void *arg)
{
    faid_zap *z = arg;
    zmq_pollitem_t it = {z->sock, 0, ZMQ_POLLIN, 0};
    while (!atomic_load(&z->stop)) {
        int rc = zmq_poll(&it, 1, ZAP_POLL_MS);
        if (rc < 0 && zmq_errno() == ETERM)
            break;
        if (rc > 0 && (it.revents & ZMQ_POLLIN))
            handle(z);
    }
    return NULL;
}

faid_zap *faid_zap_new(void *zctx, faid_zap_keys *keys, faid_diag *d)
{
    faid_zap *z = calloc(1, sizeof(*z));
    if (!z) {
        faid_zap_keys_destroy(&keys);
        faid_fail(d, FAID_ENOMEM, "ZAP handler: out of memory");
        return NULL;
    }
    pthread_mutex_init(&z->mu, NULL);
    z->keys = keys;
    atomic_init(&z->stop, 0);
    atomic_init(&z->allowed, 0u);
    atomic_init(&z->refused, 0u);
    z->sock = zmq_socket(zctx, ZMQ_REP);
    int linger = 0;
    if (!z->sock || zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
        zmq_bind(z->sock, ZAP_ENDPOINT) != 0) {
        faid_fail(d, FAID_EZMQ, "ZAP handler %s: %s", ZAP_ENDPOINT, zmq_strerror(zmq_errno()));
        faid_zap_destroy(&z);
        return NULL;
    }
    if (pthread_create(&z->thread, NULL, zap_main, z) == 0) {
        faid_thread_name(z->thread, "faid-zap");
    } else {
        faid_fail(d, FAID_ENOMEM, "ZAP handler: cannot start its thread");
        faid_zap_destroy(&z);
        return NULL;
    }
    z->started = 1;
    return z;
}

void faid_zap_set_keys(faid_zap *z, faid_zap_keys *keys)
{
    pthread_mutex_lock(&z->mu);
    faid_zap_keys *old = z->keys;
    z->keys = keys;
    pthread_mutex_unlock(&z->mu);
    faid_zap_keys_destroy(&old);
}

void faid_zap_counts(faid_zap *z, uint64_t *allowed, uint64_t *refused)
{
    *allowed = z ? atomic_load(&z->allowed) : 0;
    *refused = z ? atomic_load(&z->refused) : 0;
}

void faid_zap_destroy(faid_zap **pz)
{
    if (!pz || !*pz)
        return;
    faid_zap *z = *pz;
    if (z->started) {
        atomic_store(&z->stop, 1);
        pthread_join(z->thread, NULL);
    }
    if (z->sock)
        zmq_close(z->sock);
    faid_zap_keys_destroy(&z->keys);
    pthread_mutex_destroy(&z->mu);
    free(z);
    *pz = NULL;
}
