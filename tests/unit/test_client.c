/* Tests of the client library (client/faid_client.h) against in-process ZeroMQ peers on loopback
 * ports chosen by the system: start and result messages built with proto's msgpack writer as
 * PROTOCOL.md §3 lays them out are received and decoded (lossless PULL and PUB/SUB), a .dat file
 * is written and read back, the control client gets a reply from a REP peer and a clear timeout
 * from a silent one, and the sender's messages decode with proto's input decoder. The array map
 * rules hold alike in proto's two decoders (the cursor reader and the msgpack-c result decoder). */
#include "faid_client.h"
#include "faid_log.h"
#include "faid_proto.h"
#include "faid_test.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#define NPT 7

/* Binds sock to a free loopback port and writes the endpoint clients connect to. */
static int bind_any(void *sock, char *ep, size_t cap)
{
    if (zmq_bind(sock, "tcp://127.0.0.1:*") != 0)
        return -1;
    size_t len = cap;
    return zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &len);
}

static size_t make_start(uint8_t *buf, size_t cap, uint64_t series, uint64_t msgno)
{
    double radial[NPT];
    for (int i = 0; i < NPT; i++)
        radial[i] = 0.5 + i * 1.25;
    uint64_t shape[1] = {NPT};
    faid_mpw w;
    faid_mpw_init(&w, buf, cap);
    faid_mpw_map(&w, 10);
    faid_mpw_str(&w, FAID_K_TYPE);
    faid_mpw_str(&w, FAID_TOPIC_START);
    faid_mpw_str(&w, FAID_K_MAGIC_NUMBER);
    faid_mpw_uint(&w, FAID_PROTO_MAGIC);
    faid_mpw_str(&w, FAID_K_SOFTWARE_VERSION);
    faid_mpw_str(&w, "9.8.7");
    faid_mpw_str(&w, FAID_K_SERIES_ID);
    faid_mpw_uint(&w, series);
    faid_mpw_str(&w, FAID_K_SERIES_UNIQUE_ID);
    faid_mpw_str(&w, "scan/42");
    faid_mpw_str(&w, FAID_K_SETUP_VERSION);
    faid_mpw_uint(&w, 3);
    faid_mpw_str(&w, FAID_K_CONFIG_HASH);
    faid_mpw_str(&w, "0123456789abcdef");
    faid_mpw_str(&w, FAID_K_UNIT);
    faid_mpw_str(&w, "2th_deg");
    faid_mpw_str(&w, FAID_K_RADIAL);
    faid_mpw_ndarray(&w, "<f8", shape, 1, radial, sizeof(radial));
    faid_mpw_str(&w, FAID_K_MSG_NUMBER);
    faid_mpw_uint(&w, msgno);
    return faid_mpw_finish(&w, NULL) == 0 ? w.len : 0;
}

static float expect_I(uint64_t frame, int i)
{
    return (float)(frame * 100 + i) + 0.25f;
}

static size_t make_result(uint8_t *buf, size_t cap, uint64_t series, uint64_t frame, uint64_t msgno)
{
    float I[NPT], sigma[NPT], sd[NPT], count[NPT];
    for (int i = 0; i < NPT; i++) {
        I[i] = expect_I(frame, i);
        sigma[i] = 0.5f * (float)i;
        sd[i] = 1.0f / 3.0f + (float)i;
        count[i] = (float)(10 * i);
    }
    uint64_t shape[1] = {NPT};
    faid_mpw w;
    faid_mpw_init(&w, buf, cap);
    faid_mpw_map(&w, 12);
    faid_mpw_str(&w, FAID_K_TYPE);
    faid_mpw_str(&w, FAID_TOPIC_RESULT);
    faid_mpw_str(&w, FAID_K_SERIES_ID);
    faid_mpw_uint(&w, series);
    faid_mpw_str(&w, FAID_K_FRAME_ID);
    faid_mpw_uint(&w, frame);
    faid_mpw_str(&w, FAID_K_SETUP_VERSION);
    faid_mpw_uint(&w, 3);
    faid_mpw_str(&w, FAID_K_DEVICE);
    faid_mpw_int(&w, 1);
    faid_mpw_str(&w, FAID_K_I);
    faid_mpw_ndarray(&w, "<f4", shape, 1, I, sizeof(I));
    faid_mpw_str(&w, FAID_K_SIGMA);
    faid_mpw_ndarray(&w, "<f4", shape, 1, sigma, sizeof(sigma));
    faid_mpw_str(&w, FAID_K_STD);
    faid_mpw_ndarray(&w, "<f4", shape, 1, sd, sizeof(sd));
    faid_mpw_str(&w, FAID_K_COUNT);
    faid_mpw_ndarray(&w, "<f4", shape, 1, count, sizeof(count));
    faid_mpw_str(&w, FAID_K_RECEIVED_NS);
    faid_mpw_uint(&w, (uint64_t)faid_wall_ns());
    faid_mpw_str(&w, FAID_K_LATENCY_US);
    faid_mpw_f64(&w, 123.5);
    faid_mpw_str(&w, FAID_K_MSG_NUMBER);
    faid_mpw_uint(&w, msgno);
    return faid_mpw_finish(&w, NULL) == 0 ? w.len : 0;
}

/* Receives one consumer message on a ROUTER (waits up to 5 s): 0 and q decoded, or -1. */
static int ll_recv(void *router, faid_ll_request *q)
{
    zmq_pollitem_t it = {router, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 5000) <= 0)
        return -1;
    uint8_t id[256], body[512];
    int idlen = zmq_recv(router, id, sizeof(id), 0);
    int n = zmq_recv(router, body, sizeof(body), 0);
    faid_diag d;
    if (idlen != 8 || memcmp(id, "archiver", 8) != 0 || n < 0 || n > (int)sizeof(body))
        return -1;
    return faid_proto_decode_ll_request(body, (size_t)n, q, &d) == 0 ? 0 : -1;
}

/* [topic, body]; on a ROUTER (the lossless fake) prefixed with the consumer's routing id. */
static int send2(void *sock, const char *topic, const uint8_t *body, size_t len)
{
    int type = 0;
    size_t tl = sizeof(type);
    zmq_getsockopt(sock, ZMQ_TYPE, &type, &tl);
    if (type == ZMQ_ROUTER && zmq_send(sock, "archiver", 8, ZMQ_SNDMORE) != 8)
        return -1;
    if (zmq_send(sock, topic, strlen(topic), ZMQ_SNDMORE) < 0)
        return -1;
    return zmq_send(sock, body, len, 0) < 0 ? -1 : 0;
}

/* Reads a .dat file back: header lines into hdr (joined), numeric rows into rows[][5]. */
static int read_dat(const char *path, char *hdr, size_t hcap, double rows[][5], int maxrows)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[512];
    int n = 0;
    hdr[0] = '\0';
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#') {
            strncat(hdr, line, hcap - strlen(hdr) - 1);
            continue;
        }
        if (n < maxrows && sscanf(line, "%lf %lf %lf %lf %lf", &rows[n][0], &rows[n][1],
                                  &rows[n][2], &rows[n][3], &rows[n][4]) == 5)
            n++;
    }
    fclose(f);
    return n;
}

static void test_lossless_decode_and_dat(void *ctx)
{
    /* faid's side of the lossless channel: a ROUTER that welcomes the consumer's hello. */
    void *push = zmq_socket(ctx, ZMQ_ROUTER);
    char ep[256];
    CHECK(push && bind_any(push, ep, sizeof(ep)) == 0);
    faid_diag d;
    faid_sub_opts so = {.name = "archiver", .credit = 8};
    faid_sub *s = faid_sub_new_opts(ep, FAID_SUB_LOSSLESS, &so, &d);
    CHECK_MSG(s != NULL, "%s", d.msg);
    if (!s) {
        zmq_close(push);
        return;
    }
    faid_ll_request q;
    CHECK(ll_recv(push, &q) == 0 && q.type == FAID_LL_HELLO && q.credit == 8 && !q.has_seq);
    static const uint8_t welcome[] = "\x82\xa4type\xa7welcome\xa8instance\xb0"
                                     "00000000000000ab";
    CHECK(send2(push, FAID_TOPIC_WELCOME, welcome, sizeof(welcome) - 1) == 0);
    static uint8_t buf[8192];
    size_t n = make_start(buf, sizeof(buf), 5, 0);
    CHECK(n > 0);
    CHECK(send2(push, FAID_TOPIC_START, buf, n) == 0);
    n = make_result(buf, sizeof(buf), 5, 17, 1);
    CHECK(n > 0);
    CHECK(send2(push, FAID_TOPIC_RESULT, buf, n) == 0);
    /* faid re-sends what was not acknowledged with the same msg_number: dropped. */
    CHECK(send2(push, FAID_TOPIC_RESULT, buf, n) == 0);
    /* A lossless consumer may also get messages without a topic frame. */
    n = make_result(buf, sizeof(buf), 5, 18, 2);
    CHECK(zmq_send(push, "archiver", 8, ZMQ_SNDMORE) == 8 && zmq_send(push, buf, n, 0) == (int)n);
    /* Garbage: must be reported and consumed, not crash, and not stop the stream. */
    CHECK(send2(push, FAID_TOPIC_RESULT, (const uint8_t *)"\x93\x01", 2) == 0);
    n = make_result(buf, sizeof(buf), 5, 19, 3);
    CHECK(send2(push, FAID_TOPIC_START, buf, n) == 0); /* topic does not match the type */

    faid_sub_msg msg;
    int rc = faid_sub_recv(s, 10000, &msg, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(strcmp(msg.topic, "start") == 0);
    CHECK(msg.m.type == FAID_OUT_START);
    const faid_series_info *si = faid_sub_series(s);
    CHECK(si->valid && si->series_id == 5 && si->nbins == NPT && si->setup_version == 3);
    CHECK(strcmp(si->unit, "2th_deg") == 0);
    CHECK(strcmp(si->config_hash, "0123456789abcdef") == 0);
    CHECK(strcmp(si->software_version, "9.8.7") == 0);
    CHECK(strcmp(si->series_unique_id, "scan/42") == 0);
    CHECK(si->radial && si->radial[NPT - 1] == 0.5 + (NPT - 1) * 1.25);

    rc = faid_sub_recv(s, 10000, &msg, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(msg.m.type == FAID_OUT_RESULT && strcmp(msg.topic, "result") == 0);
    CHECK(msg.m.series_id == 5 && msg.m.has_frame_id && msg.m.frame_id == 17);
    CHECK(msg.m.msg_number == 1 && msg.m.device == 1 && msg.m.latency_us == 123.5);
    CHECK(msg.m.I.nelem == NPT && msg.m.I.dtype == FAID_DT_F32);
    double I[NPT];
    CHECK(faid_array_view_to_f64(&msg.m.I, I, NPT, &d) == 0);
    int same = 1;
    for (int i = 0; i < NPT; i++)
        same &= I[i] == (double)expect_I(17, i);
    CHECK(same);
    CHECK(faid_array_view_to_f64(&msg.m.I, I, NPT - 1, &d) == FAID_ESIZE);

    char dir[] = "/tmp/faid_test_client_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char stem[128], path[1024];
    faid_dat_series_stem(stem, sizeof(stem), msg.m.series_id, si->series_unique_id);
    CHECK(faid_dat_path(path, sizeof(path), dir, stem, msg.m.frame_id, &d) == 0);
    char want[1024];
    snprintf(want, sizeof(want), "%s/scan_42_00017.dat", dir);
    CHECK_MSG(strcmp(path, want) == 0, "%s", path);
    rc = faid_sub_write_dat(s, &msg, path, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    char hdr[2048];
    double rows[NPT + 2][5];
    int nrows = read_dat(path, hdr, sizeof(hdr), rows, NPT + 2);
    CHECK(nrows == NPT);
    CHECK(strstr(hdr, "# unit: 2th_deg\n") != NULL);
    CHECK(strstr(hdr, "# config_hash: 0123456789abcdef\n") != NULL);
    CHECK(strstr(hdr, "# software_version: 9.8.7\n") != NULL);
    CHECK(strstr(hdr, "# frame_id: 17\n") != NULL);
    CHECK(strstr(hdr, "# columns: 2th_deg I sigma std count\n") != NULL);
    int exact = nrows == NPT;
    for (int i = 0; i < nrows && i < NPT; i++) {
        exact &= rows[i][0] == 0.5 + i * 1.25;
        exact &= (float)rows[i][1] == expect_I(17, i);
        exact &= (float)rows[i][2] == 0.5f * (float)i;
        exact &= (float)rows[i][3] == 1.0f / 3.0f + (float)i; /* float32 survives the text */
        exact &= rows[i][4] == 10.0 * i;
    }
    CHECK(exact);
    remove(path);

    rc = faid_sub_recv(s, 10000, &msg, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(msg.topic[0] == '\0' && msg.m.type == FAID_OUT_RESULT && msg.m.frame_id == 18);

    rc = faid_sub_recv(s, 10000, &msg, &d);
    CHECK(rc == FAID_EFORMAT || rc == FAID_ETRUNC);
    CHECK(msg.len == 2);
    rc = faid_sub_recv(s, 10000, &msg, &d);
    CHECK(rc == FAID_EPROTO);
    CHECK(strstr(d.msg, "topic") != NULL);

    rc = faid_sub_recv(s, 50, &msg, &d);
    CHECK(rc == FAID_ETIMEOUT);
    faid_sub_ll_stats ls;
    faid_sub_lossless_stats(s, &ls);
    CHECK(ls.duplicates == 1 && ls.sessions == 1 && ls.delivered == 3);
    CHECK(strcmp(ls.instance, "00000000000000ab") == 0);
    rmdir(dir);
    faid_sub_destroy(&s);
    CHECK(s == NULL);
    /* Leaving acknowledges everything delivered (msg_number 2, cumulative) and says bye. */
    int acked = 0, bye = 0;
    while (ll_recv(push, &q) == 0) {
        if (q.type == FAID_LL_ACK && q.has_seq && q.seq == 2 &&
            strcmp(q.instance, "00000000000000ab") == 0)
            acked = 1;
        bye |= q.type == FAID_LL_BYE;
        if (bye)
            break;
    }
    CHECK(acked && bye);
    faid_sub_destroy(&s); /* NULL is fine */
    zmq_close(push);
}

static void test_pub_sub(void *ctx)
{
    void *pub = zmq_socket(ctx, ZMQ_PUB);
    char ep[256];
    CHECK(pub && bind_any(pub, ep, sizeof(ep)) == 0);
    faid_diag d;
    faid_sub *s = faid_sub_new(ep, FAID_SUB_PUB, 1000, &d);
    CHECK_MSG(s != NULL, "%s", d.msg);
    if (!s) {
        zmq_close(pub);
        return;
    }
    /* A subscription takes a moment to reach the publisher: publish until one arrives. */
    static uint8_t buf[8192];
    size_t n = make_result(buf, sizeof(buf), 2, 4, 9);
    faid_sub_msg msg;
    int got = 0;
    for (int tries = 0; tries < 200 && !got; tries++) {
        CHECK(send2(pub, FAID_TOPIC_RESULT, buf, n) == 0);
        got = faid_sub_recv(s, 50, &msg, &d) == 0;
    }
    CHECK(got);
    if (got) {
        CHECK(msg.m.type == FAID_OUT_RESULT && msg.m.frame_id == 4 && msg.m.series_id == 2);
        /* Without a start the profile is written against the bin index. */
        char dir[] = "/tmp/faid_test_client_XXXXXX";
        CHECK(mkdtemp(dir) != NULL);
        char path[1024];
        snprintf(path, sizeof(path), "%s/x.dat", dir);
        CHECK(faid_sub_write_dat(s, &msg, path, &d) == 0);
        char hdr[2048];
        double rows[NPT][5];
        CHECK(read_dat(path, hdr, sizeof(hdr), rows, NPT) == NPT);
        CHECK(strstr(hdr, "# unit: bin\n") != NULL && rows[3][0] == 3.0);
        remove(path);
        rmdir(dir);
    }
    faid_sub_destroy(&s);
    zmq_close(pub);
}

struct rep_args {
    void *sock;
    int ok;
    faid_ctl_request got;
    int decode_rc;
};

static void *rep_thread(void *p)
{
    struct rep_args *a = p;
    uint8_t buf[2048];
    int n = zmq_recv(a->sock, buf, sizeof(buf), 0);
    a->decode_rc = n < 0 ? -1 : faid_proto_decode_request(buf, (size_t)n, &a->got, NULL);
    faid_mpw w;
    uint8_t out[256];
    faid_mpw_init(&w, out, sizeof(out));
    faid_mpw_map(&w, a->ok ? 3 : 3);
    faid_mpw_str(&w, FAID_K_OK);
    faid_mpw_bool(&w, a->ok);
    faid_mpw_str(&w, FAID_K_CMD);
    faid_mpw_str(&w, faid_ctl_cmd_name(a->got.cmd));
    if (a->ok) {
        faid_mpw_str(&w, FAID_K_SETUP_VERSION);
        faid_mpw_uint(&w, 4);
    } else {
        faid_mpw_str(&w, FAID_K_ERROR);
        faid_mpw_str(&w, "no such file: x.yaml");
    }
    zmq_send(a->sock, out, w.len, 0);
    return NULL;
}

static void test_control(void *ctx)
{
    void *rep = zmq_socket(ctx, ZMQ_REP);
    char ep[256];
    CHECK(rep && bind_any(rep, ep, sizeof(ep)) == 0);
    faid_diag d;
    faid_ctl *c = faid_ctl_new(ep, 10000, &d);
    CHECK_MSG(c != NULL, "%s", d.msg);
    if (!c) {
        zmq_close(rep);
        return;
    }
    for (int ok = 1; ok >= 0; ok--) {
        struct rep_args a = {rep, ok, {0}, -1};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, rep_thread, &a) == 0);
        faid_ctl_request q;
        memset(&q, 0, sizeof(q));
        q.cmd = FAID_CTL_RELOAD;
        snprintf(q.path, sizeof(q.path), "x.yaml");
        faid_ctl_reply r;
        int rc = faid_ctl_call(c, &q, &r, &d);
        pthread_join(th, NULL);
        CHECK_MSG(rc == 0, "%s", d.msg);
        CHECK(a.decode_rc == 0 && a.got.cmd == FAID_CTL_RELOAD);
        CHECK(strcmp(a.got.path, "x.yaml") == 0);
        CHECK(r.ok == ok);
        if (!ok)
            CHECK(strcmp(r.error, "no such file: x.yaml") == 0);
        faid_mp_obj v;
        if (ok)
            CHECK(faid_proto_map_find(r.body, r.len, FAID_K_SETUP_VERSION, &v, NULL, NULL) == 0 &&
                  v.u == 4);
    }
    faid_ctl_destroy(&c);
    CHECK(c == NULL);
    zmq_close(rep);

    /* A peer that never answers: a timeout with the promised message, twice (socket renewed). */
    void *silent = zmq_socket(ctx, ZMQ_ROUTER);
    CHECK(silent && bind_any(silent, ep, sizeof(ep)) == 0);
    c = faid_ctl_new(ep, 200, &d);
    CHECK(c != NULL);
    for (int k = 0; k < 2 && c; k++) {
        faid_ctl_request q;
        memset(&q, 0, sizeof(q));
        q.cmd = FAID_CTL_STATUS;
        faid_ctl_reply r;
        int rc = faid_ctl_call(c, &q, &r, &d);
        CHECK(rc == FAID_ETIMEOUT);
        char want[512];
        snprintf(want, sizeof(want), "no answer from faid at %s within 0.2 s", ep);
        CHECK_MSG(strncmp(d.msg, want, strlen(want)) == 0 && strstr(d.msg, "authentication?"), "%s",
                  d.msg);
    }
    faid_ctl_destroy(&c);
    zmq_close(silent);
    CHECK(faid_ctl_new(ep, 0, &d) == NULL && d.code == FAID_EINVAL);
    CHECK(faid_ctl_new("nonsense://x", 100, &d) == NULL && d.code == FAID_EZMQ);
}

static void test_sender(void *ctx)
{
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    char ep[256];
    CHECK(pull && bind_any(pull, ep, sizeof(ep)) == 0);
    faid_diag d;
    faid_sender *s = faid_sender_new(ep, 0, 0, 10000, &d);
    CHECK_MSG(s != NULL, "%s", d.msg);
    if (!s) {
        zmq_close(pull);
        return;
    }
    static uint16_t payload[64];
    for (int i = 0; i < 64; i++)
        payload[i] = (uint16_t)(i * 1000);
    faid_in_header h;
    memset(&h, 0, sizeof(h));
    h.type = FAID_IN_START;
    h.series_id = 11;
    h.nimages = 2;
    snprintf(h.series_unique_id, sizeof(h.series_unique_id), "run-1");
    CHECK(faid_sender_series(s, &h, &d) == 0);
    h.type = FAID_IN_IMAGE;
    h.rows = 8;
    h.cols = 8;
    h.dtype = FAID_DT_U16;
    h.encoding = FAID_ENC_NONE;
    for (int k = 0; k < 2; k++) {
        h.frame_id = (uint64_t)k;
        CHECK(faid_sender_image(s, &h, payload, sizeof(payload), k == 0, &d) == 0);
    }
    h.type = FAID_IN_END;
    CHECK(faid_sender_series(s, &h, &d) == 0);
    CHECK(faid_sender_series(s, &(faid_in_header){.type = FAID_IN_IMAGE}, &d) == FAID_EINVAL);

    faid_in_type want[4] = {FAID_IN_START, FAID_IN_IMAGE, FAID_IN_IMAGE, FAID_IN_END};
    for (int k = 0; k < 4; k++) {
        uint8_t buf[4096];
        int n = zmq_recv(pull, buf, sizeof(buf), 0);
        CHECK(n > 0);
        faid_in_header g;
        CHECK(n > 0 && faid_proto_decode_input(buf, (size_t)n, &g, &d) == 0);
        CHECK(g.type == want[k] && g.series_id == 11);
        CHECK(strcmp(g.series_unique_id, "run-1") == 0);
        int more = 0;
        size_t ml = sizeof(more);
        zmq_getsockopt(pull, ZMQ_RCVMORE, &more, &ml);
        CHECK(more == (g.type == FAID_IN_IMAGE));
        if (g.type == FAID_IN_START)
            CHECK(g.nimages == 2);
        if (g.type == FAID_IN_IMAGE) {
            CHECK(g.frame_id == (uint64_t)(k - 1) && g.rows == 8 && g.cols == 8);
            CHECK(g.dtype == FAID_DT_U16 && g.encoding == FAID_ENC_NONE);
            uint8_t pl[256];
            n = zmq_recv(pull, pl, sizeof(pl), 0);
            CHECK(n == (int)sizeof(payload) && memcmp(pl, payload, sizeof(payload)) == 0);
        }
    }
    faid_sender_destroy(&s);
    CHECK(s == NULL);
    zmq_close(pull);

    /* Nobody listening and a full queue: the send times out instead of hanging. */
    s = faid_sender_new("tcp://127.0.0.1:1", 0, 1, 100, &d);
    CHECK(s != NULL);
    int rc = 0;
    h.type = FAID_IN_IMAGE;
    for (int k = 0; k < 8 && rc == 0 && s; k++)
        rc = faid_sender_image(s, &h, payload, sizeof(payload), 0, &d);
    CHECK(rc == FAID_ETIMEOUT);
    faid_sender_destroy(&s);
}

static void test_paths(void)
{
    char p[64];
    faid_diag d;
    CHECK(faid_dat_path(p, sizeof(p), "out", "a b", 3, &d) == 0);
    CHECK(strcmp(p, "out/a_b_00003.dat") == 0);
    CHECK(faid_dat_path(p, sizeof(p), "", "s", 123456, &d) == 0 && strcmp(p, "s_123456.dat") == 0);
    CHECK(faid_dat_path(p, 8, "out", "s", 1, &d) == FAID_ESIZE);
    faid_dat_series_stem(p, sizeof(p), 12, "");
    CHECK(strcmp(p, "series12") == 0);
    faid_dat_series_stem(p, sizeof(p), 12, "uid");
    CHECK(strcmp(p, "uid") == 0);

    /* Unaligned little-endian data of several types converts to float64. */
    uint8_t raw[1 + 3 * 8];
    double vals[3] = {-1.5, 2.25, 1e300};
    memcpy(raw + 1, vals, sizeof(vals));
    faid_array_view a = {.dtype = FAID_DT_F64,
                         .ndim = 1,
                         .shape = {3},
                         .nelem = 3,
                         .data = raw + 1,
                         .nbytes = sizeof(vals)};
    double out[3];
    CHECK(faid_array_view_to_f64(&a, out, 3, &d) == 0 && memcmp(out, vals, sizeof(vals)) == 0);
    int16_t iv[3] = {-7, 0, 32000};
    memcpy(raw + 1, iv, sizeof(iv));
    a.dtype = FAID_DT_I16;
    a.nbytes = sizeof(iv);
    CHECK(faid_array_view_to_f64(&a, out, 3, &d) == 0 && out[0] == -7 && out[2] == 32000);
    a.nbytes = 2;
    CHECK(faid_array_view_to_f64(&a, out, 3, &d) == FAID_ETRUNC);
}

static void test_reply_print(void)
{
    uint8_t buf[1024];
    faid_mpw w;
    faid_mpw_init(&w, buf, sizeof(buf));
    faid_mpw_map(&w, 6);
    faid_mpw_str(&w, FAID_K_OK);
    faid_mpw_bool(&w, 1);
    faid_mpw_str(&w, FAID_K_CMD);
    faid_mpw_str(&w, "status");
    faid_mpw_str(&w, FAID_K_STATE);
    faid_mpw_str(&w, "running");
    faid_mpw_str(&w, FAID_K_COUNTERS);
    faid_mpw_map(&w, 2);
    faid_mpw_str(&w, "received");
    faid_mpw_uint(&w, 12);
    faid_mpw_str(&w, "failed");
    faid_mpw_int(&w, -1);
    faid_mpw_str(&w, "devices");
    faid_mpw_array(&w, 1);
    faid_mpw_map(&w, 1);
    faid_mpw_str(&w, "name");
    faid_mpw_str(&w, "ref");
    faid_mpw_str(&w, "ranks");
    faid_mpw_array(&w, 20);
    for (int i = 0; i < 20; i++)
        faid_mpw_uint(&w, (uint64_t)i);
    CHECK(faid_mpw_finish(&w, NULL) == 0);
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    CHECK(f != NULL);
    if (!f)
        return;
    faid_diag d;
    CHECK(faid_ctl_reply_print(f, buf, w.len, &d) == 0);
    fclose(f);
    const char *want = "state: running\n"
                       "counters:\n"
                       "  received: 12\n"
                       "  failed: -1\n"
                       "devices:\n"
                       "  - name: ref\n"
                       "ranks: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, "
                       "... (20 items)]\n";
    CHECK_MSG(text && strcmp(text, want) == 0, "got:\n%s", text ? text : "(null)");
    free(text);
    /* A truncated reply is an error with a message, not a crash. */
    f = open_memstream(&text, &tlen);
    if (f) {
        faid_diag_clear(&d);
        int rc = faid_ctl_reply_print(f, buf, w.len / 2, &d);
        fclose(f);
        CHECK(rc == FAID_ETRUNC && d.msg[0]);
        free(text);
    }
}

/* One malformed (or, last, valid) array map per case, written as the value of key "I". */
static void write_array_case(faid_mpw *w, int c)
{
    static const uint8_t bytes[16] = {0};
    switch (c) {
    case 0:
        faid_mpw_uint(w, 3);
        return;
    case 1:
        faid_mpw_map(w, 1);
        faid_mpw_str(w, FAID_K_DTYPE);
        faid_mpw_uint(w, 4);
        return;
    case 2:
    case 3:
        faid_mpw_map(w, 1);
        faid_mpw_str(w, FAID_K_DTYPE);
        faid_mpw_str(w, c == 2 ? "<x9" : ">f4");
        return;
    case 4:
        faid_mpw_map(w, 1);
        faid_mpw_str(w, FAID_K_SHAPE);
        faid_mpw_uint(w, 3);
        return;
    case 5:
        faid_mpw_map(w, 1);
        faid_mpw_str(w, FAID_K_SHAPE);
        faid_mpw_array(w, 2);
        faid_mpw_uint(w, 2);
        faid_mpw_int(w, -1);
        return;
    case 6:
        faid_mpw_map(w, 1);
        faid_mpw_str(w, FAID_K_SHAPE);
        faid_mpw_array(w, 2);
        faid_mpw_uint(w, 1u << 21);
        faid_mpw_uint(w, 1u << 21);
        return;
    case 7:
        faid_mpw_map(w, 1);
        faid_mpw_str(w, FAID_K_DATA);
        faid_mpw_str(w, "abcd");
        return;
    default: {
        /* 8: no data; 9: 8 bytes for 3 floats; 10: valid, extra key skipped */
        faid_mpw_map(w, c == 8 ? 2 : c == 9 ? 3 : 4);
        faid_mpw_str(w, FAID_K_DTYPE);
        faid_mpw_str(w, c == 10 ? "<u2" : "<f4");
        faid_mpw_str(w, FAID_K_SHAPE);
        faid_mpw_array(w, c == 10 ? 2 : 1);
        faid_mpw_uint(w, c == 10 ? 2 : 3);
        if (c == 10)
            faid_mpw_uint(w, 2);
        if (c == 8)
            return;
        if (c == 10) {
            faid_mpw_str(w, "note");
            faid_mpw_str(w, "ignored");
        }
        faid_mpw_str(w, FAID_K_DATA);
        faid_mpw_bin(w, bytes, 8);
        return;
    }
    }
}

/* Each malformed array map gives the same code and message from faid_proto_read_array and, under
 * the key's prefix, from faid_proto_decode_output. */
static void test_array_rules(void)
{
    static const struct {
        int code;
        const char *msg;
    } want[] = {
        {FAID_EFORMAT, "array: expected a {dtype, shape, data} map"},
        {FAID_EFORMAT, "array: dtype is not a short string"},
        {FAID_EDTYPE, "array: unknown dtype \"<x9\""},
        /* faid_dtype_parse takes no '>' prefix: big-endian is refused as unknown */
        {FAID_EDTYPE, "array: unknown dtype \">f4\""},
        {FAID_EFORMAT, "array: shape must be a list of at most 4 ints"},
        {FAID_EFORMAT, "array: bad shape entry 1"},
        {FAID_EFORMAT, "array: shape too large"},
        {FAID_EFORMAT, "array: data is not bin"},
        {FAID_EFORMAT, "array: missing data"},
        {FAID_ESIZE, "array: 8 data bytes for 3 elements of <f4"},
        {0, ""},
    };
    for (int c = 0; c < (int)(sizeof want / sizeof want[0]); c++) {
        uint8_t buf[256];
        faid_mpw w;
        faid_mpw_init(&w, buf, sizeof(buf));
        faid_mpw_map(&w, 2);
        faid_mpw_str(&w, FAID_K_TYPE);
        faid_mpw_str(&w, FAID_TOPIC_RESULT);
        faid_mpw_str(&w, FAID_K_I);
        size_t at = w.len;
        write_array_case(&w, c);
        CHECK(faid_mpw_finish(&w, NULL) == 0);
        faid_diag d;
        faid_diag_clear(&d);
        faid_mpr r;
        faid_mpr_init(&r, buf + at, w.len - at);
        faid_array_view a;
        int rc = faid_proto_read_array(&r, &a, &d);
        CHECK_MSG(rc == want[c].code && (!rc || strcmp(d.msg, want[c].msg) == 0),
                  "case %d: cursor reader: %d \"%s\"", c, rc, d.msg);
        if (!rc)
            CHECK(a.dtype == FAID_DT_U16 && a.ndim == 2 && a.nelem == 4 && a.nbytes == 8);
        char prefixed[sizeof d.msg];
        snprintf(prefixed, sizeof prefixed, "key \"%s\": %s", FAID_K_I, want[c].msg);
        static faid_out_msg m;
        faid_diag_clear(&d);
        rc = faid_proto_decode_output(buf, w.len, &m, &d);
        CHECK_MSG(rc == want[c].code && (!rc || strcmp(d.msg, prefixed) == 0),
                  "case %d: result decoder: %d \"%s\"", c, rc, d.msg);
        if (!rc)
            CHECK(m.I.dtype == FAID_DT_U16 && m.I.ndim == 2 && m.I.nelem == 4 && m.I.nbytes == 8);
    }
}

int main(void)
{
    RUN(test_array_rules());
    RUN(test_reply_print());
    void *ctx = zmq_ctx_new();
    RUN(test_paths());
    RUN(test_lossless_decode_and_dat(ctx));
    RUN(test_pub_sub(ctx));
    RUN(test_control(ctx));
    RUN(test_sender(ctx));
    zmq_ctx_term(ctx);
    return faid_test_finish();
}
