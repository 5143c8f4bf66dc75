/* example.c -- drive an rtrigid server (rtrigid serve arm) with the C reference client.
 *
 *   cc -std=c99 -O2 example.c rtrigid_hil.c -o example
 *   ./example HOST PORT [STEPS [SCALE]]
 *
 * Runs STEPS (default 1000) lock-steps of one step each, with every actuator's control (the
 * first 0.5 - 0.001 (i % 100), the others -0.8 + 0.002 (i % 50) at step i, times SCALE,
 * default 1), a load on the last body and a joint force on the last joint with one rate
 * changing from step to step, and prints after each step a line: the step count, then qpos
 * and qvel as the bits of each double in hex (so a comparison is exact).  The values are made
 * with + - * only, so another program (tests/io/test_hil_c.py) computes the same ones.  The
 * summary goes to stderr.
 */
#include "rtrigid_hil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t bits(double d) { uint64_t v; memcpy(&v, &d, sizeof v); return v; }

int main(int argc, char **argv) {
    rth_client *c = NULL;
    const rth_hello *h;
    const rth_state *s;
    long steps = 1000, i;
    double scale = 1.0;
    uint32_t k, last_joint, last_body;
    int err;
    if (argc < 3) {
        fprintf(stderr, "usage: %s HOST PORT [STEPS [SCALE]]\n", argv[0]);
        return 2;
    }
    if (argc > 3) steps = strtol(argv[3], NULL, 10);
    if (argc > 4) scale = strtod(argv[4], NULL);
    err = rth_connect(&c, argv[1], atoi(argv[2]));
    if (err) {
        fprintf(stderr, "connect: error %d\n", err);
        return 1;
    }
    h = rth_hello_info(c);
    fprintf(stderr, "%s (%s, dt=%g): %u bodies, %u joints, %u actuators, nq %u, nv %u",
            h->scenario, h->integrator, h->dt, h->n_bodies, h->n_joints, h->n_actuators,
            h->nq, h->nv);
    if (h->has_limits)
        fprintf(stderr, "; max_payload %u, idle timeout %g s", h->max_payload, h->idle_timeout);
    fprintf(stderr, "\n");
    last_joint = h->n_joints;
    while (last_joint > 0 && h->joints[last_joint - 1].nv != 1) last_joint--;
    if (h->n_bodies < 1 || last_joint == 0 || h->n_actuators > 32) {
        fprintf(stderr, "this example wants bodies, a joint with one rate and at most 32 "
                "actuators (rtrigid serve arm)\n");
        rth_close(c);
        return 1;
    }
    last_body = h->n_bodies - 1;
    last_joint -= 1;
    for (i = 0; i < steps; i++) {
        rth_control u[32];
        rth_load f;
        rth_joint_force jf;
        for (k = 0; k < h->n_actuators; k++) {
            u[k].actuator = k;
            u[k].value = scale * (k == 0 ? 0.5 - 0.001 * (double)(i % 100)
                                         : -0.8 + 0.002 * (double)(i % 50));
        }
        memset(&f, 0, sizeof f);
        f.body = last_body;
        f.force[0] = 0.01 * (double)(i % 7) - 0.03;
        f.torque[1] = 0.001 * (double)(i % 5);
        memset(&jf, 0, sizeof jf);
        jf.joint = last_joint;
        jf.nv = 1;
        jf.value[0] = i % 3 == 0 ? 0.05 : -0.02;
        err = rth_step(c, 1, &f, 1, u, h->n_actuators, &jf, 1);
        if (err) {
            fprintf(stderr, "step %ld: error %d %s\n", i, err, rth_last_error(c));
            rth_close(c);
            return 1;
        }
        s = rth_last_state(c);
        printf("%" PRIu64, s->steps);
        for (k = 0; k < s->nq; k++) printf(" %016" PRIx64, bits(s->qpos[k]));
        for (k = 0; k < s->nv; k++) printf(" %016" PRIx64, bits(s->qvel[k]));
        printf("\n");
    }
    err = rth_keepalive(c);
    if (err) fprintf(stderr, "keepalive: error %d\n", err);
    rth_close(c);
    return err ? 1 : 0;
}
