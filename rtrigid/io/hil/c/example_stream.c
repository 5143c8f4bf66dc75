/* example_stream.c -- command an rtrigid stream (rtrigid serve arm --udp PORT) with the C
 * reference client.
 *
 *   cc -std=c99 -O2 example_stream.c rtrigid_hil.c -o example_stream
 *   ./example_stream HOST PORT [STATES]
 *
 * Sends command 1, then answers each state received with the next command (sequence numbers
 * 2, 3, ...): both actuators' controls, a load on the last body and a joint force on the last
 * joint, made from the sequence number with + - * only, so another program
 * (tests/io/test_hil_c.py) computes the same ones.  After each state it prints a line: the
 * tick, the command in force, the step count, then qpos and qvel as the bits of each double in
 * hex.  After STATES states (default 200) it prints the server's figures to stderr.
 */
#include "rtrigid_hil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t bits(double d) { uint64_t v; memcpy(&v, &d, sizeof v); return v; }

static int command(rth_client *c, const rth_hello *h, uint32_t seq) {
    rth_control u[8];
    rth_load f;
    rth_joint_force jf;
    uint32_t k;
    for (k = 0; k < h->n_actuators; k++) {
        u[k].actuator = k;
        u[k].value = k == 0 ? 0.5 - 0.001 * (double)(seq % 100) : -0.8 + 0.002 * (double)(seq % 50);
    }
    memset(&f, 0, sizeof f);
    f.body = h->n_bodies - 1;
    f.force[0] = 0.01 * (double)(seq % 7) - 0.03;
    memset(&jf, 0, sizeof jf);
    jf.joint = h->n_joints - 1;
    jf.nv = 1;
    jf.value[0] = seq % 3 == 0 ? 0.05 : -0.02;
    return rth_stream_command(c, seq, &f, 1, u, h->n_actuators, &jf, 1);
}

int main(int argc, char **argv) {
    rth_client *c = NULL;
    const rth_hello *h;
    const rth_stream_info *info;
    const rth_state *s;
    rth_stream_figures fig;
    long states = 200, i;
    uint64_t tick;
    uint32_t k, in_force, status;
    int err;
    if (argc < 3) {
        fprintf(stderr, "usage: %s HOST PORT [STATES]\n", argv[0]);
        return 2;
    }
    if (argc > 3) states = strtol(argv[3], NULL, 10);
    err = rth_stream_open(&c, argv[1], atoi(argv[2]), 2.0);
    if (err) {
        fprintf(stderr, "open: error %d\n", err);
        return 1;
    }
    h = rth_hello_info(c);
    info = rth_stream_info_of(c);
    fprintf(stderr, "%s (%s, dt=%g): nq %u, nv %u; %g Hz, a state every %u ticks, watchdog "
            "%g s (%s), max_payload %u\n", h->scenario, h->integrator, h->dt, h->nq, h->nv,
            info->rate, info->every, info->watchdog, info->on_silence ? "zero" : "hold",
            info->max_payload);
    if (h->n_bodies < 1 || h->n_joints < 1 || h->n_actuators > 8 ||
        h->joints[h->n_joints - 1].nv != 1) {
        fprintf(stderr, "this example wants bodies, at most 8 actuators and a last joint "
                "with one rate (rtrigid serve arm --udp PORT)\n");
        rth_close(c);
        return 1;
    }
    err = command(c, h, 1);
    for (i = 0; !err && i < states; i++) {
        err = rth_stream_next(c, &tick, &in_force, &status);
        if (err) break;
        s = rth_last_state(c);
        printf("%" PRIu64 " %" PRIu32 " %" PRIu64, tick, in_force, s->steps);
        for (k = 0; k < s->nq; k++) printf(" %016" PRIx64, bits(s->qpos[k]));
        for (k = 0; k < s->nv; k++) printf(" %016" PRIx64, bits(s->qvel[k]));
        printf("\n");
        err = command(c, h, (uint32_t)i + 2);
    }
    if (!err) err = rth_stream_stats(c, &fig);
    if (err) {
        fprintf(stderr, "error %d %s\n", err, rth_last_error(c));
        rth_close(c);
        return 1;
    }
    fprintf(stderr, "ticks %" PRIu64 ", late %" PRIu64 ", folded %" PRIu64 ", worst lateness "
            "%.1f us, worst step %.1f us; commands applied %" PRIu64 ", superseded %" PRIu64
            ", stale %" PRIu64 ", reordered %" PRIu64 ", invalid %" PRIu64 "; states sent %"
            PRIu64 "\n", fig.ticks, fig.late_ticks, fig.folded_ticks, fig.worst_lateness_us,
            fig.worst_step_us, fig.commands_applied, fig.commands_superseded,
            fig.dropped_stale, fig.dropped_reordered, fig.dropped_invalid, fig.states_sent);
    rth_close(c);
    return 0;
}
