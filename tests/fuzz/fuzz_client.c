/* Fuzz target for the client library's handling of bytes received from a daemon: output message
 * decoding with the series state it keeps (radial axis from start messages), .dat writing of a
 * result against that state, the human rendering of control replies and the merging subscriber's
 * parser of a fan-out's `lost` report (faid_merge_parse_lost) and the sum of aggregates messages
 * (faid_aggr_add, twice: the second against the first's shapes). Any byte sequence must
 * give 0 or an error code with a message, never a crash, hang or leak.
 *
 * Input layout: the whole input is tried as one message and as a reply; then, when the first two
 * bytes (little-endian) give a length n that fits, bytes [2, 2+n) are fed as a start message and
 * the rest as a result of the same series state, so start/result combinations get exercised. */
#include "faid_client.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *devnull(void)
{
    static FILE *f;
    if (!f)
        f = fopen("/dev/null", "w");
    return f;
}

static void check_diag(int rc, const faid_diag *d)
{
    if (rc != 0 && (rc > 0 || d->code != rc || d->msg[0] == '\0'))
        abort();
}

static void feed(const uint8_t *p, size_t n, faid_series_info *si)
{
    faid_sub_msg msg;
    faid_diag d;
    faid_diag_clear(&d);
    int rc = faid_out_decode(p, n, &msg, si, &d);
    check_diag(rc, &d);
    if (rc == 0 && msg.m.type == FAID_OUT_RESULT && msg.m.I.nelem > 0 &&
        msg.m.I.nelem < (1u << 20)) {
        faid_diag_clear(&d);
        check_diag(faid_result_write_dat(si, &msg.m, "/dev/null", &d), &d);
    }
    if (si->valid && si->nbins > 0 && !si->radial)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *out = devnull();
    if (!out)
        return 0;
    faid_diag d;
    faid_diag_clear(&d);
    check_diag(faid_ctl_reply_print(out, data, size, &d), &d);
    faid_merge_lost lost;
    faid_diag_clear(&d);
    int lrc = faid_merge_parse_lost(data, size, &lost, &d);
    check_diag(lrc, &d);
    faid_aggr_sum sum = {0};
    for (int k = 0; k < 2; k++) {
        faid_diag_clear(&d);
        check_diag(faid_aggr_add(&sum, data, size, &d), &d);
    }
    if (sum.powder && sum.rows * sum.cols > FAID_AGGR_MAX_PIXELS)
        abort();
    faid_aggr_clear(&sum);
    if (lrc == 0 && (lost.nranges < 0 || lost.nranges > FAID_MERGE_RANGES ||
                     (lost.nframes == 0 && lost.nranges > 0 && !lost.truncated)))
        abort();

    faid_series_info si;
    memset(&si, 0, sizeof(si));
    feed(data, size, &si);
    faid_series_info_clear(&si);
    if (size >= 2) {
        size_t n = (size_t)data[0] | (size_t)data[1] << 8;
        if (n <= size - 2) {
            feed(data + 2, n, &si);
            feed(data + 2 + n, size - 2 - n, &si);
        }
    }
    faid_series_info_clear(&si);
    return 0;
}
