/* example_session.c -- sessions with the C reference client: resume a simulation after the
 * connection closed, or watch another client's simulation (rtrigid serve arm).
 *
 *   cc -std=c99 -O2 example_session.c rtrigid_hil.c -o example_session
 *   ./example_session HOST PORT STEPS [PAUSE]     step; at step PAUSE close, reconnect, resume
 *   ./example_session HOST PORT resume TOKEN STEPS   a new process goes on with the session TOKEN
 *   ./example_session HOST PORT observe TOKEN [STATES]   print the states of the session TOKEN
 *
 * TOKEN is a session token as 32 hex digits: the first form prints its own on stderr
 * ("session <hex> ..."); a Python client's is client.session.hex().
 *
 * Stepping: the requests of example.c (one step each, the controls, load and joint force of
 * step k made from k alone), up to STEPS steps, with example.c's line after each step (the
 * step count, then qpos and qvel as the bits of each double in hex).  The first form closes
 * the connection once PAUSE steps (default STEPS / 2) are done, as a rig that stops or loses
 * its network would, connects again and RESUMEs with its token: the state it gets back is
 * printed as "resumed <line>", and the steps go on where they stopped, bit for bit as if the
 * connection had never closed.  "resume" does the same from a new process; if the token is
 * refused (ERROR 12: unknown, expired, or its connection still open) it says so and steps a
 * simulation of its own from the start.
 *
 * Observing: "now <line>" for the session's state when it starts watching, then a line
 * "push SEQ <line>" for every state the session's stepping client receives (SEQ: the request
 * it answered), until STATES of them are printed or the session expires (its client did not
 * resume it in time).  Each line is flushed at once.
 */
#include "rtrigid_hil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t bits(double d) { uint64_t v; memcpy(&v, &d, sizeof v); return v; }

/* The step count, qpos and qvel in hex; the line ends here. */
static void print_state(const rth_state *s) {
    uint32_t k;
    printf("%" PRIu64, s->steps);
    for (k = 0; k < s->nq; k++) printf(" %016" PRIx64, bits(s->qpos[k]));
    for (k = 0; k < s->nv; k++) printf(" %016" PRIx64, bits(s->qvel[k]));
    printf("\n");
    fflush(stdout);
}

static int hex_digit(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* 32 hex digits into the token's 16 bytes; 0 if it is not that. */
static int parse_token(const char *hex, uint8_t token[RTH_TOKEN_SIZE]) {
    int i, hi, lo;
    if (strlen(hex) != 2 * RTH_TOKEN_SIZE) return 0;
    for (i = 0; i < RTH_TOKEN_SIZE; i++) {
        hi = hex_digit(hex[2 * i]);
        lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return 0;
        token[i] = (uint8_t)(16 * hi + lo);
    }
    return 1;
}

static int connect_to(rth_client **c, const char *host, const char *port) {
    int err = rth_connect(c, host, atoi(port));
    if (err) fprintf(stderr, "connect: error %d\n", err);
    return err;
}

/* example.c's requests, one step each, until `until` steps are done; `done` steps are. */
static int drive(rth_client *c, uint64_t done, uint64_t until) {
    const rth_hello *h = rth_hello_info(c);
    uint32_t k;
    int err;
    if (h->n_bodies < 1 || h->n_joints < 1 || h->n_actuators > 8 ||
        h->joints[h->n_joints - 1].nv != 1) {
        fprintf(stderr, "this example wants bodies, at most 8 actuators and a last joint "
                "with one rate (rtrigid serve arm)\n");
        return 1;
    }
    for (; done < until; done++) {
        rth_control u[8];
        rth_load f;
        rth_joint_force jf;
        for (k = 0; k < h->n_actuators; k++) {
            u[k].actuator = k;
            u[k].value = k == 0 ? 0.5 - 0.001 * (double)(done % 100)
                                : -0.8 + 0.002 * (double)(done % 50);
        }
        memset(&f, 0, sizeof f);
        f.body = h->n_bodies - 1;
        f.force[0] = 0.01 * (double)(done % 7) - 0.03;
        f.torque[1] = 0.001 * (double)(done % 5);
        memset(&jf, 0, sizeof jf);
        jf.joint = h->n_joints - 1;
        jf.nv = 1;
        jf.value[0] = done % 3 == 0 ? 0.05 : -0.02;
        if ((err = rth_step(c, 1, &f, 1, u, h->n_actuators, &jf, 1)) != RTH_OK) {
            fprintf(stderr, "step %" PRIu64 ": error %d %s\n", done, err, rth_last_error(c));
            return 1;
        }
        print_state(rth_last_state(c));
    }
    return 0;
}

/* Connect, RESUME `token` and step on to `until` steps; a refused token: a new simulation. */
static int resume_and_drive(const char *host, const char *port, const uint8_t *token,
                            uint64_t until) {
    rth_client *c = NULL;
    uint64_t done = 0;
    int err = connect_to(&c, host, port);
    if (err) return 1;
    err = rth_resume(c, token);
    if (err == RTH_OK) {
        done = rth_last_state(c)->steps;
        printf("resumed ");
        print_state(rth_last_state(c));
    } else if (err == RTH_ERR_SESSION) {
        fprintf(stderr, "resume: error %d %s; stepping a new simulation\n", err,
                rth_last_error(c));
    } else {
        fprintf(stderr, "resume: error %d %s\n", err, rth_last_error(c));
        rth_close(c);
        return 1;
    }
    err = drive(c, done, until);
    rth_close(c);   /* the session waits again, session_grace seconds */
    return err;
}

static int observe(const char *host, const char *port, const uint8_t *token, long states) {
    rth_client *c = NULL;
    uint32_t seq;
    long n;
    int err = connect_to(&c, host, port);
    if (err) return 1;
    if ((err = rth_observe(c, token)) != RTH_OK) {
        fprintf(stderr, "observe: error %d %s\n", err, rth_last_error(c));
        rth_close(c);
        return 1;
    }
    printf("now ");
    print_state(rth_last_state(c));
    for (n = 0; states < 0 || n < states; n++) {
        if ((err = rth_observe_next(c, &seq)) != RTH_OK) break;
        printf("push %" PRIu32 " ", seq);
        print_state(rth_last_state(c));
    }
    if (err) fprintf(stderr, "observe: error %d %s\n", err, rth_last_error(c));
    rth_close(c);
    return err == RTH_OK || err == RTH_ERR_SESSION ? 0 : 1;   /* expired: the watch is over */
}

int main(int argc, char **argv) {
    rth_client *c = NULL;
    const rth_hello *h;
    uint8_t token[RTH_TOKEN_SIZE];
    uint64_t steps, pause;
    int k, err, observing = argc > 4 && !strcmp(argv[3], "observe"),
                resuming = argc > 5 && !strcmp(argv[3], "resume");
    if (observing || resuming) {
        if (!parse_token(argv[4], token)) {
            fprintf(stderr, "TOKEN: expected 32 hex digits, got %s\n", argv[4]);
            return 2;
        }
        if (observing) return observe(argv[1], argv[2], token,
                                      argc > 5 ? strtol(argv[5], NULL, 10) : -1);
        return resume_and_drive(argv[1], argv[2], token, strtoull(argv[5], NULL, 10));
    }
    if (argc < 4 || !strcmp(argv[3], "observe") || !strcmp(argv[3], "resume")) {
        fprintf(stderr, "usage: %s HOST PORT STEPS [PAUSE]\n"
                "       %s HOST PORT resume TOKEN STEPS\n"
                "       %s HOST PORT observe TOKEN [STATES]\n", argv[0], argv[0], argv[0]);
        return 2;
    }
    steps = strtoull(argv[3], NULL, 10);
    pause = argc > 4 ? strtoull(argv[4], NULL, 10) : steps / 2;
    if (pause > steps) pause = steps;
    if (connect_to(&c, argv[1], argv[2])) return 1;
    h = rth_hello_info(c);
    if (!h->has_session) {
        fprintf(stderr, "this server has no sessions (no session block in HELLO)\n");
        rth_close(c);
        return 1;
    }
    fprintf(stderr, "session ");
    for (k = 0; k < RTH_TOKEN_SIZE; k++) fprintf(stderr, "%02x", h->session[k]);
    fprintf(stderr, " (waits %g s after the connection closes)\n", h->session_grace);
    memcpy(token, h->session, RTH_TOKEN_SIZE);   /* h goes with c */
    err = drive(c, 0, pause);
    rth_close(c);   /* a pause: the simulation waits for its token */
    if (err) return err;
    return resume_and_drive(argv[1], argv[2], token, steps);
}
