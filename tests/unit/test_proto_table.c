/* Unit tests of the protocol key table (proto/faid_proto_keys.h): every key name once, every
 * (message, key) row once, every message with rows, lookup by name, the generated markdown, and
 * the key checker on messages built by faid's own encoders (it must pass them and refuse a key
 * the table lacks, a key twice, or a required key missing), and the writer's map sizes counted
 * by begin/end (and its refusal of containers that do not close). */
#include "faid_proto.h"
#include "faid_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_table_shape(void)
{
    for (int a = 1; a < FAID_NKEYS; a++) {
        const char *na = faid_key_name((faid_key)a);
        CHECK(na[0] != '\0');
        CHECK(faid_key_lookup(na, strlen(na)) == (faid_key)a);
        for (int b = a + 1; b < FAID_NKEYS; b++)
            CHECK_MSG(strcmp(na, faid_key_name((faid_key)b)) != 0, "key \"%s\" defined twice", na);
    }
    CHECK(faid_key_lookup("no_such_key", 11) == FAID_KEY_UNKNOWN);
    CHECK(faid_key_lookup("type", 3) == FAID_KEY_UNKNOWN);
    CHECK(strcmp(FAID_K_SERIES_ID, "series_id") == 0);
    size_t n;
    const faid_proto_row *r = faid_proto_rows(&n);
    CHECK(n > 200);
    int per_msg[FAID_NPMSGS] = {0};
    for (size_t i = 0; i < n; i++) {
        per_msg[r[i].msg]++;
        CHECK(r[i].presence == FAID_KP_REQ || r[i].presence == FAID_KP_OPT);
        CHECK(r[i].type[0] && r[i].meaning[0]);
        for (size_t j = i + 1; j < n; j++)
            CHECK_MSG(!(r[i].msg == r[j].msg && r[i].key == r[j].key), "%s: key \"%s\" twice",
                      faid_proto_msg_marker(r[i].msg), faid_key_name(r[i].key));
    }
    for (int m = 0; m < FAID_NPMSGS; m++) {
        CHECK_MSG(per_msg[m] > 0, "message %s has no rows", faid_proto_msg_marker((faid_proto_msg)m));
        char *md = faid_proto_msg_markdown((faid_proto_msg)m);
        CHECK(md && strncmp(md, "| key | type | presence | meaning |\n", 36) == 0);
        free(md);
    }
    char *md = faid_proto_msg_markdown(FAID_PMSG_ERROR);
    CHECK(md && strstr(md, "| `frame_id` | uint | optional | present when the header named one |"));
    free(md);
}

static void test_checker(void)
{
    uint8_t buf[1024];
    faid_mpw w;
    faid_diag d = {0};
    faid_out_error e = {.series_id = 3, .has_frame_id = 1, .frame_id = 9, .code = FAID_ECORRUPT,
                        .stage = "worker", .message = "bad block", .msg_number = 4};
    faid_mpw_init(&w, buf, sizeof buf);
    faid_proto_write_error(&w, &e);
    CHECK(faid_mpw_finish(&w, NULL) == 0);
    CHECK_MSG(faid_proto_check_keys(FAID_PMSG_ERROR, FAID_NPMSGS, buf, w.len, &d) == 0, "%s",
              d.msg);
    /* the same body is not an end message */
    CHECK(faid_proto_check_keys(FAID_PMSG_END, FAID_NPMSGS, buf, w.len, &d) == FAID_EFORMAT);

    faid_ctl_request q = {.cmd = FAID_CTL_RELOAD};
    strcpy(q.path, "/etc/faid.yaml");
    size_t len = 0;
    CHECK(faid_proto_encode_request(&q, buf, sizeof buf, &len, &d) == 0);
    CHECK_MSG(faid_proto_check_keys(FAID_PMSG_CTL_REQUEST, FAID_NPMSGS, buf, len, &d) == 0, "%s",
              d.msg);
    faid_ll_request l = {.type = FAID_LL_ACK, .credit = 8, .has_seq = 1, .seq = 5};
    strcpy(l.instance, "0123456789abcdef");
    CHECK(faid_proto_encode_ll_request(&l, buf, sizeof buf, &len, &d) == 0);
    CHECK_MSG(faid_proto_check_keys(FAID_PMSG_LL_REQUEST, FAID_NPMSGS, buf, len, &d) == 0, "%s",
              d.msg);
    faid_in_header h = {.type = FAID_IN_IMAGE, .protocol_version = FAID_PROTO_VERSION,
                        .series_id = 1, .has_frame_id = 1, .frame_id = 2, .rows = 4, .cols = 5,
                        .dtype = FAID_DT_U16, .encoding = FAID_ENC_BSLZ4, .nimages = -1};
    CHECK(faid_proto_encode_input(&h, buf, sizeof buf, &len, &d) == 0);
    CHECK_MSG(faid_proto_check_keys(FAID_PMSG_IN, FAID_NPMSGS, buf, len, &d) == 0, "%s", d.msg);

    /* refusals: a key the table lacks, a key twice, a required key missing */
    faid_mpw_init(&w, buf, sizeof buf);
    faid_mpw_map(&w, 2);
    faid_mpw_str(&w, FAID_K_CMD);
    faid_mpw_str(&w, "ping");
    faid_mpw_str(&w, "undocumented");
    faid_mpw_uint(&w, 1);
    CHECK(faid_proto_check_keys(FAID_PMSG_CTL_REQUEST, FAID_NPMSGS, buf, w.len, &d) ==
          FAID_EFORMAT);
    CHECK(strstr(d.msg, "undocumented") != NULL);
    faid_mpw_init(&w, buf, sizeof buf);
    faid_mpw_map(&w, 2);
    faid_mpw_str(&w, FAID_K_CMD);
    faid_mpw_str(&w, "ping");
    faid_mpw_str(&w, FAID_K_CMD);
    faid_mpw_str(&w, "ping");
    CHECK(faid_proto_check_keys(FAID_PMSG_CTL_REQUEST, FAID_NPMSGS, buf, w.len, &d) ==
          FAID_EFORMAT);
    faid_mpw_init(&w, buf, sizeof buf);
    faid_mpw_map(&w, 1);
    faid_mpw_str(&w, FAID_K_PATH);
    faid_mpw_str(&w, "x");
    CHECK(faid_proto_check_keys(FAID_PMSG_CTL_REQUEST, FAID_NPMSGS, buf, w.len, &d) ==
          FAID_EFORMAT);
    CHECK(strstr(d.msg, "\"cmd\" missing") != NULL);
}

static void test_writer_counts(void)
{
    uint8_t buf[4096];
    faid_mpw w;
    faid_diag d = {0};
    faid_mpw_init(&w, buf, sizeof buf);
    faid_mpw_map_begin(&w);
    for (int k = 0; k < 20; k++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", k);
        faid_mpw_key(&w, key);
        if (k == 3) { /* nested: a begun map, a fixed array of begun maps, an array map */
            faid_mpw_map_begin(&w);
            faid_mpw_key(&w, "a");
            faid_mpw_array(&w, 2);
            faid_mpw_map_begin(&w);
            faid_mpw_map_end(&w);
            faid_mpw_map_begin(&w);
            faid_mpw_key(&w, "x");
            faid_mpw_nil(&w);
            faid_mpw_map_end(&w);
            faid_mpw_key(&w, "b");
            uint64_t n = 2;
            float f[2] = {1, 2};
            faid_mpw_ndarray(&w, "<f4", &n, 1, f, sizeof f);
            faid_mpw_map_end(&w);
        } else {
            faid_mpw_uint(&w, (uint64_t)k * 1000);
        }
    }
    faid_mpw_map_end(&w);
    CHECK(faid_mpw_finish(&w, &d) == 0);
    faid_mpr r;
    faid_mp_obj o;
    faid_mpr_init(&r, buf, w.len);
    CHECK(faid_mpr_next(&r, &o, &d) == 0 && o.type == FAID_MP_MAP && o.len == 20);
    faid_mpr_init(&r, buf, w.len);
    CHECK(faid_mpr_skip(&r, &d) == 0 && r.p == buf + w.len);
    faid_mp_obj v;
    faid_mpr at;
    CHECK(faid_proto_map_find(buf, w.len, "k3", &v, &at, &d) == 0 && v.type == FAID_MP_MAP &&
          v.len == 2);
    CHECK(faid_proto_map_find(buf, w.len, "k19", &v, NULL, &d) == 0 && v.u == 19000);

    /* containers that do not close are refused by finish */
    faid_mpw_init(&w, buf, sizeof buf);
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, "lonely");
    faid_mpw_map_end(&w);
    CHECK(faid_mpw_finish(&w, &d) == FAID_EINVAL);
    faid_mpw_init(&w, buf, sizeof buf);
    faid_mpw_map_end(&w);
    CHECK(faid_mpw_finish(&w, &d) == FAID_EINVAL);
    faid_mpw_init(&w, buf, sizeof buf);
    faid_mpw_map(&w, 2);
    faid_mpw_key(&w, "a");
    faid_mpw_uint(&w, 1);
    CHECK(faid_mpw_finish(&w, &d) == FAID_EINVAL);
    faid_mpw_init(&w, buf, sizeof buf);
    faid_mpw_map_begin(&w);
    CHECK(faid_mpw_finish(&w, &d) == FAID_EINVAL);
    /* overflow wins over balance: the buffer was too small */
    faid_mpw_init(&w, buf, 8);
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, "a long key that does not fit");
    faid_mpw_uint(&w, 1);
    faid_mpw_map_end(&w);
    CHECK(faid_mpw_finish(&w, &d) == FAID_ESIZE);
}

int main(void)
{
    test_writer_counts();
    test_table_shape();
    test_checker();
    return faid_test_finish();
}
