/* reqflood_driver: a hostile requester for tests/integration/test_hardening_hits.py. It connects
 * PEERS DEALER sockets to a ROUTER endpoint and sends REQUEST on each, flat out, as
 * [empty delimiter, REQUEST] (what a REQ sends), never waiting: a full queue skips that peer for
 * a round; replies are never read (what a careless requester does: faid's queue of replies to
 * it fills and later ones are not sent). It runs until it is killed, after printing "ready" once
 * every socket is connected.
 *
 * Why C: a Python flooder (two processes of 16 DEALERs) sent slower than faid read, so faid's
 * publisher found the socket empty between bursts and the flood never starved it; the probe of
 * issue 20 that found the starvation sent flat out from native code.
 *
 * Usage: reqflood_driver ENDPOINT REQUEST PEERS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s ENDPOINT REQUEST PEERS\n", argv[0]);
        return 2;
    }
    const char *req = argv[2];
    const size_t len = strlen(req);
    int peers = atoi(argv[3]);
    if (peers < 1 || peers > 1024) {
        fprintf(stderr, "PEERS: 1 to 1024\n");
        return 2;
    }
    void *ctx = zmq_ctx_new();
    void **socks = calloc((size_t)peers, sizeof *socks);
    if (!ctx || !socks)
        return 1;
    for (int i = 0; i < peers; i++) {
        int zero = 0;
        socks[i] = zmq_socket(ctx, ZMQ_DEALER);
        if (!socks[i] || zmq_setsockopt(socks[i], ZMQ_LINGER, &zero, sizeof zero) != 0 ||
            zmq_connect(socks[i], argv[1]) != 0) {
            fprintf(stderr, "%s: %s\n", argv[1], zmq_strerror(zmq_errno()));
            return 1;
        }
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        for (int i = 0; i < peers; i++)
            for (int k = 0; k < 256; k++)
                if (zmq_send(socks[i], "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
                    zmq_send(socks[i], req, len, ZMQ_DONTWAIT) < 0)
                    break;
}
