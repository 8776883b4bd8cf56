/* faid_limits: the daemon's fixed sizes, shared by its state (faid_state.h), the generations
 * (faid_gen.h) and the services, so that none of them includes another for a number. */
#ifndef FAID_LIMITS_H
#define FAID_LIMITS_H

#define FAID_MAX_WORKERS 16 /* compute devices (workers) of one daemon */
/* Largest user_data a frame or start message may carry (bytes, after conversion to msgpack). */
#define FAID_MAX_USER_DATA (64 * 1024)

#endif
