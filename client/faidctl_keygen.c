/* faidctl keygen NAME: a CURVE key pair for faid (security.secret_key_file) or for one of its
 * clients (--key): NAME.key holds the public and the secret key (mode 0600), NAME.pub the public
 * key alone, both z85 in ZeroMQ's certificate layout (faid_keyfile.h). Existing files are never
 * overwritten. */
#include "faidctl.h"

#include "faid_keyfile.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: faidctl keygen NAME\n"
               "\n"
               "Writes a ZeroMQ CURVE key pair: NAME.key (public and secret key, mode 0600) and\n"
               "NAME.pub (public key), z85, refusing to overwrite either. For faid: NAME.key is\n"
               "its security.secret_key_file and clients get NAME.pub (--server-key). For a\n"
               "client: it keeps NAME.key (--key) and NAME.pub goes into faid's\n"
               "security.authorized_keys folder. NAME may include a folder.\n");
}

int faidctl_keygen(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = faidctl_getopt(argc, argv, longopts, &first)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        usage(stderr);
        return 2;
    }
    if (optind + 1 != argc || !argv[optind][0]) {
        fprintf(stderr, "faidctl keygen: needs exactly one NAME\n");
        usage(stderr);
        return 2;
    }
    const char *stem = argv[optind];
    if (!zmq_has("curve")) {
        fprintf(stderr, "faidctl keygen: this libzmq was built without CURVE (libsodium)\n");
        return 1;
    }
    char pub[41], sec[41];
    if (zmq_curve_keypair(pub, sec) != 0) {
        fprintf(stderr, "faidctl keygen: cannot make a key pair: %s\n", zmq_strerror(zmq_errno()));
        return 1;
    }
    faid_diag d;
    faid_diag_clear(&d);
    int rc = faid_keyfile_write_pair(stem, pub, sec, &d);
    memset(sec, 0, sizeof(sec));
    if (rc) {
        fprintf(stderr, "faidctl keygen: %s\n", d.msg);
        return 1;
    }
    printf("wrote %s.key (secret, mode 0600) and %s.pub\npublic key: %s\n", stem, stem, pub);
    return 0;
}
