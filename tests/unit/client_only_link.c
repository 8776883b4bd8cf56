/* Built against the client library alone (tests/CMakeLists.txt links only faidclient): a C
 * subscriber or sender must not need the GPU stack. Linking is the test; running it checks that
 * the protocol code it pulls in works: a native header and a DECTRIS v2 message made by the
 * client's encoders decode again. */
#include "faid_client.h"
#include "faid_client_dectris.h"
#include "faid_input.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
    faid_diag d;
    faid_diag_clear(&d);
    uint8_t buf[4096];
    size_t len = 0;
    faid_dectris_series s = {
        .series_id = 5, .rows = 2, .cols = 3, .dtype = FAID_DT_U16, .nimages = 1};
    const uint16_t px[6] = {1, 2, 3, 4, 5, 6};
    faid_input_msg m;
    int fails = 0;
    if (faid_dectris2_image(&s, 9, FAID_ENC_NONE, px, sizeof(px), buf, sizeof(buf), &len, &d))
        fails++;
    faid_input_part p = {buf, len};
    if (faid_input_decode(FAID_PROTOCOL_AUTO, &p, 1, NULL, &m, &d) != 0 || m.h.frame_id != 9 ||
        m.h.rows != 2 || m.h.cols != 3 || m.payload_len != sizeof(px) ||
        memcmp(m.payload, px, sizeof(px)) != 0)
        fails++;
    faid_sender *snd = faid_sender_new("tcp://127.0.0.1:9", 0, 0, 10, &d);
    if (!snd)
        fails++;
    faid_sender_destroy(&snd);
    printf("client-only link: %d failed%s%s\n", fails, fails ? ": " : "", fails ? d.msg : "");
    return fails != 0;
}
