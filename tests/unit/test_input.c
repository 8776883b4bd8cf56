/* Tests of the input-format interface (proto/faid_input.h): protocol names, per-message detection
 * and the native format's decoding, part counts and error attribution. The DECTRIS formats are
 * tested against independent encoders in tests/reference/test_input_formats.py. */
#include "faid_input.h"
#include "faid_test.h"

#include <string.h>

static size_t native_header(faid_in_type type, uint8_t *buf, size_t cap)
{
    faid_in_header h;
    memset(&h, 0, sizeof(h));
    h.type = type;
    h.protocol_version = FAID_PROTO_VERSION;
    h.series_id = 7;
    snprintf(h.series_unique_id, sizeof(h.series_unique_id), "run-7");
    h.nimages = type == FAID_IN_START ? 3 : -1;
    if (type == FAID_IN_IMAGE) {
        h.has_frame_id = 1;
        h.frame_id = 2;
        h.rows = 4;
        h.cols = 5;
        h.dtype = FAID_DT_U16;
        h.encoding = FAID_ENC_NONE;
    }
    size_t len = 0;
    faid_diag d;
    if (faid_proto_encode_input(&h, buf, cap, &len, &d) != 0)
        return 0;
    return len;
}

static void test_names(void)
{
    faid_input_protocol p;
    const char *names[] = {"auto", "native", "dectris-v1", "dectris-v2"};
    for (int k = 0; k < 4; k++) {
        CHECK(faid_input_protocol_parse(names[k], &p) == 0);
        CHECK(strcmp(faid_input_protocol_name(p), names[k]) == 0);
        CHECK(faid_input_available(p, NULL) == 0);
    }
    CHECK(faid_input_protocol_parse("dectris", &p) == -1);
    CHECK(faid_input_format_of(FAID_PROTOCOL_AUTO) == NULL);
    CHECK(faid_input_format_of(FAID_PROTOCOL_NATIVE) == &faid_input_native);
    CHECK(faid_input_native.max_parts <= FAID_INPUT_MAX_PARTS);
    CHECK(faid_input_dectris_v1.max_parts <= FAID_INPUT_MAX_PARTS);
    CHECK(faid_input_dectris_v2.max_parts <= FAID_INPUT_MAX_PARTS);
}

static void test_detect(void)
{
    const uint8_t cbor[] = {0xd9, 0xd9, 0xf7, 0xa1, 0x64, 't', 'y', 'p', 'e'};
    const char v1[] = "  {\"htype\":\"dimage-1.0\",\"series\":1}";
    const char json_other[] = "{\"type\":\"image\"}";
    const uint8_t msgpack[] = {0x81, 0xa4, 't', 'y', 'p', 'e', 0xa3, 'e', 'n', 'd'};
    const faid_input_protocol A = FAID_PROTOCOL_AUTO;
    CHECK(faid_input_detect(A, cbor, sizeof(cbor)) == &faid_input_dectris_v2);
    CHECK(faid_input_detect(A, cbor, 2) == NULL);
    CHECK(faid_input_detect(A, v1, strlen(v1)) == &faid_input_dectris_v1);
    CHECK(faid_input_detect(A, json_other, strlen(json_other)) == NULL);
    CHECK(faid_input_detect(A, msgpack, sizeof(msgpack)) == &faid_input_native);
    CHECK(faid_input_detect(A, "", 0) == NULL);
    CHECK(faid_input_detect(A, NULL, 0) == NULL);
    /* A fixed protocol takes every message; its decoder refuses what is not its own. */
    CHECK(faid_input_detect(FAID_PROTOCOL_NATIVE, cbor, sizeof(cbor)) == &faid_input_native);
}

static void test_native(void)
{
    uint8_t hdr[512], payload[40] = {1, 2, 3};
    faid_input_msg m;
    faid_diag d;
    size_t n = native_header(FAID_IN_IMAGE, hdr, sizeof(hdr));
    CHECK(n > 0);
    faid_input_part parts[3] = {{hdr, n}, {payload, sizeof(payload)}, {payload, 1}};
    for (int p = 0; p < 2; p++) {
        faid_input_protocol proto = p ? FAID_PROTOCOL_AUTO : FAID_PROTOCOL_NATIVE;
        faid_diag_clear(&d);
        CHECK_MSG(faid_input_decode(proto, parts, 2, NULL, &m, &d) == 0, "%s", d.msg);
        CHECK(m.format == &faid_input_native && m.header_ok);
        CHECK(m.h.type == FAID_IN_IMAGE && m.h.series_id == 7 && m.h.frame_id == 2);
        CHECK(m.h.rows == 4 && m.h.cols == 5 && m.h.dtype == FAID_DT_U16);
        CHECK(strcmp(m.h.series_unique_id, "run-7") == 0);
        /* The payload is handed out where it lies. */
        CHECK(m.payload == payload && m.payload_len == sizeof(payload) && m.payload_part == 1);
    }
    /* Wrong part counts: the header was read, so the frame still belongs to its series. */
    faid_diag_clear(&d);
    CHECK(faid_input_decode(FAID_PROTOCOL_NATIVE, parts, 3, NULL, &m, &d) == FAID_EPROTO);
    CHECK(m.header_ok && m.h.type == FAID_IN_IMAGE && m.h.frame_id == 2);
    CHECK(strstr(d.msg, "3 part(s), expected 2") != NULL);
    faid_diag_clear(&d);
    CHECK(faid_input_decode(FAID_PROTOCOL_NATIVE, parts, 1, NULL, &m, &d) == FAID_EPROTO);
    CHECK(m.header_ok);

    n = native_header(FAID_IN_START, hdr, sizeof(hdr));
    parts[0].len = n;
    faid_diag_clear(&d);
    CHECK(faid_input_decode(FAID_PROTOCOL_AUTO, parts, 1, NULL, &m, &d) == 0);
    CHECK(m.h.type == FAID_IN_START && m.meta.nimages == 3 && (m.meta.have & FAID_META_NIMAGES));
    CHECK(faid_input_decode(FAID_PROTOCOL_AUTO, parts, 2, NULL, &m, &d) == FAID_EPROTO);
    CHECK(strstr(d.msg, "start message has 2 parts") != NULL);

    n = native_header(FAID_IN_END, hdr, sizeof(hdr));
    parts[0].len = n;
    CHECK(faid_input_decode(FAID_PROTOCOL_NATIVE, parts, 1, NULL, &m, &d) == 0);
    CHECK(m.h.type == FAID_IN_END && m.h.series_id == 7);

    /* Not a msgpack map: refused by the native format, unclaimed by auto. */
    const char junk[] = "hello";
    faid_input_part j = {junk, 5};
    faid_diag_clear(&d);
    CHECK(faid_input_decode(FAID_PROTOCOL_NATIVE, &j, 1, NULL, &m, &d) == FAID_EPROTO);
    CHECK(!m.header_ok && strstr(d.msg, "not a native faid message") != NULL);
    faid_diag_clear(&d);
    CHECK(faid_input_decode(FAID_PROTOCOL_AUTO, &j, 1, NULL, &m, &d) == FAID_EPROTO);
    CHECK(m.format == NULL && strstr(d.msg, "part 1") != NULL);
    CHECK(faid_input_decode(FAID_PROTOCOL_AUTO, NULL, 0, NULL, &m, &d) == FAID_EPROTO);
}

int main(void)
{
    RUN(test_names());
    RUN(test_detect());
    RUN(test_native());
    return faid_test_finish();
}
