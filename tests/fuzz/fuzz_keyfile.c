/* Fuzz target for the CURVE key file parser (faid_keyfile_parse: faid's secret key file, the *.pub
 * files of security.authorized_keys, a client's --server-key / --key): any byte sequence gives 0
 * or an error code with a message naming the file, never a crash, hang or leak; a key it returns
 * is 40 characters of the z85 alphabet, NUL-terminated. Each input is parsed both ways (public,
 * secret). */
#include "faid_keyfile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int secret = 0; secret < 2; secret++) {
        faid_keytext kt;
        faid_diag d;
        faid_diag_clear(&d);
        int rc = faid_keyfile_parse((const char *)data, size, "fuzz.key", secret, &kt, &d);
        if (rc == 0) {
            if (!faid_z85_key_valid(secret ? kt.secret_key : kt.public_key))
                abort();
            if (kt.public_key[0] && !faid_z85_key_valid(kt.public_key))
                abort();
        } else if (strncmp(d.msg, "fuzz.key", 8) != 0 || kt.public_key[0] || kt.secret_key[0]) {
            abort();
        }
    }
    return 0;
}
