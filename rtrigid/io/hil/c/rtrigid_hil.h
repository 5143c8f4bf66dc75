/* rtrigid_hil.h -- C99 reference client of the rtrigid lock-step HIL protocol, version 2 (with
 * its sessions: rth_resume, rth_observe), and of its UDP stream, version 1 (rth_stream_*).
 *
 * The protocol is specified in docs/hil/protocol.md of the rtrigid sources.  Dependencies: the
 * C standard library and POSIX sockets.  One client per connection; not thread-safe.
 *
 * Every function returns 0 on success, a negative RTH_E_* value on a local or transport
 * failure, or a positive value: the code of the server's ERROR reply (its message is in
 * rth_last_error).  After RTH_E_IO, RTH_E_CLOSED or RTH_E_PROTOCOL the connection is unusable.
 */
#ifndef RTRIGID_HIL_H
#define RTRIGID_HIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RTH_VERSION 2
#define RTH_TOKEN_SIZE 16        /* a session token's bytes */

enum {
    RTH_OK = 0,
    RTH_E_ARG = -1,      /* a bad argument (NULL, count out of range, non-finite value) */
    RTH_E_NOMEM = -2,    /* malloc failed */
    RTH_E_CONNECT = -3,  /* the address did not resolve or the connection was refused */
    RTH_E_IO = -4,       /* send or recv failed */
    RTH_E_CLOSED = -5,   /* the server closed the connection */
    RTH_E_PROTOCOL = -6, /* a reply this client cannot read (wrong magic, version, seq, kind) */
    RTH_E_TIMEOUT = -7   /* streaming: no datagram within the timeout */
};

/* Server ERROR codes (docs/hil/protocol.md, ERROR replies) */
enum {
    RTH_ERR_MAGIC = 1, RTH_ERR_VERSION = 2, RTH_ERR_KIND = 3, RTH_ERR_TOO_LONG = 4,
    RTH_ERR_TRUNCATED = 5, RTH_ERR_SIZE = 6, RTH_ERR_VALUE = 7, RTH_ERR_STEP = 8,
    RTH_ERR_INTERNAL = 9, RTH_ERR_FULL = 10, RTH_ERR_IDLE = 11, RTH_ERR_SESSION = 12
};

typedef struct {
    const char *name, *kind;     /* "revolute", "prismatic", "spherical", "free", ... */
    int32_t parent;              /* body index, -1: the world */
    uint32_t child;              /* body index */
    uint32_t qpos_at, nq, qvel_at, nv;
    double lower, upper;         /* limits; -inf, +inf: none */
} rth_joint;

typedef struct {
    const char *name, *kind;     /* "motor", "position", "velocity" */
    uint32_t joint;
    double gear, ctrl_lo, ctrl_hi, force_lo, force_hi;
} rth_actuator;

typedef struct {
    const char *name, *kind;     /* "imu" */
    uint32_t body;
    double point[3];             /* body axes, from the centre of mass */
    uint32_t width;              /* values in a state */
} rth_sensor;

typedef struct {
    uint32_t n_bodies, max_steps_per_request, n_joints, n_actuators, n_sensors, nq, nv;
    double dt;
    const char *integrator, *scenario;
    const char **body_names;     /* n_bodies */
    rth_joint *joints;           /* n_joints */
    rth_actuator *actuators;     /* n_actuators */
    rth_sensor *sensors;         /* n_sensors */
    int has_limits;              /* 0 from a server that does not send the limits block */
    uint32_t max_payload, max_clients;
    double idle_timeout, partial_timeout, send_timeout, time_slice;  /* seconds */
    int has_session;             /* 0 from a server that does not send the session block */
    uint8_t session[RTH_TOKEN_SIZE];  /* this connection's session token (rth_resume: the
                                         resumed one) */
    double session_grace;        /* s a closed connection's simulation waits for RESUME; 0: none */
} rth_hello;

typedef struct {
    double t;                    /* s */
    uint64_t steps;
    uint32_t n_bodies, nq, nv, n_sensor_values;
    /* per body 13 values: x y z, q0 q1 q2 q3 (body -> world), v xyz (world), w xyz (world) */
    const double *bodies;
    const double *qpos, *qvel, *sensors;
} rth_state;

typedef struct { uint32_t body; double force[3], torque[3]; } rth_load;       /* world axes */
typedef struct { uint32_t actuator; double value; } rth_control;
typedef struct { uint32_t joint; uint32_t nv; double value[6]; } rth_joint_force;

typedef struct rth_client rth_client;

/* Connect over TCP (TCP_NODELAY), send HELLO and read its reply.  *out is set on success. */
int rth_connect(rth_client **out, const char *host, int port);
void rth_close(rth_client *c);

const rth_hello *rth_hello_info(const rth_client *c);
/* The state of the last reply that carried one; valid until the next request. */
const rth_state *rth_last_state(const rth_client *c);
/* The message of the last ERROR reply (empty if none). */
const char *rth_last_error(const rth_client *c);

/* STEP: n_steps (0 .. max_steps_per_request; 0 sets the controls and joint forces only);
 * loads act for these steps only, controls and joint forces are held until changed. */
int rth_step(rth_client *c, uint32_t n_steps, const rth_load *loads, uint32_t n_loads,
             const rth_control *controls, uint32_t n_controls,
             const rth_joint_force *joint_forces, uint32_t n_joint_forces);
int rth_state_now(rth_client *c);                 /* STATE */
int rth_reset(rth_client *c);                     /* RESET */
/* SET_STATE: qpos (nq values) and/or qvel (nv values); NULL leaves that part. */
int rth_set_state(rth_client *c, const double *qpos, const double *qvel);
int rth_keepalive(rth_client *c);                 /* KEEPALIVE */

/* -- sessions (docs/hil/protocol.md, "Sessions: RESUME and OBSERVE") -----------------------
 * Every connection's simulation belongs to a session named by the token in rth_hello_info's
 * session.  After the connection closes, the simulation waits session_grace seconds for a new
 * connection to resume it.  A token that names no session the call may take (rth_resume:
 * unknown, expired, or its connection still open; rth_observe: unknown or expired) gets
 * RTH_ERR_SESSION and changes nothing. */
/* RESUME (after rth_connect): this connection takes over the waiting session `token` and
 * steps on exactly where it stopped; rth_last_state is its state, and rth_hello_info's session
 * is `token` from then on (a simulation the connection stepped before waits in turn, under
 * the token it had). */
int rth_resume(rth_client *c, const uint8_t token[RTH_TOKEN_SIZE]);
/* OBSERVE (after rth_connect, on a connection that has stepped nothing: one with a simulation
 * of its own gets ERROR 12): this connection becomes an observer of the session `token`, open
 * or waiting; rth_last_state is its state now.  From then on the connection only receives:
 * every other request returns RTH_E_ARG (an observer has no idle timeout, so it needs no
 * KEEPALIVE). */
int rth_observe(rth_client *c, const uint8_t token[RTH_TOKEN_SIZE]);
/* An observer's next state (blocks until it comes): every state the session's stepping
 * connection receives (its replies to STEP, STATE, RESET, SET_STATE, RESUME), in order, as
 * rth_last_state; *seq (may be NULL) is the seq of the request it answered.  When the session
 * expires (its client did not resume it in time) the server sends ERROR 12 with seq 0 and
 * closes: RTH_ERR_SESSION is returned, its message in rth_last_error. */
int rth_observe_next(rth_client *c, uint32_t *seq);

/* -- streaming over UDP (docs/hil/protocol.md, "Streaming over UDP", stream version 1) ----
 * The same rth_client type, opened with rth_stream_open: rth_hello_info describes the
 * simulation (from DESCRIBE; has_limits is 0), rth_last_state is the last state received. */
#define RTH_STREAM_VERSION 1
#define RTH_STATUS_WATCHDOG 1u   /* status bit: the watchdog has acted */

typedef struct {
    double rate;                 /* ticks per second */
    uint32_t every;              /* a state every `every` ticks */
    double watchdog;             /* s */
    uint32_t on_silence;         /* 0 hold, 1 zero */
    uint32_t max_payload;        /* the longest COMMAND payload */
} rth_stream_info;

typedef struct {
    uint64_t ticks, scheduled_ticks, steps, late_ticks, folded_ticks, overruns;
    uint64_t commands_applied, commands_superseded, dropped_stale, dropped_reordered,
             dropped_invalid, states_sent, watchdog_trips;
    double worst_lateness_us, worst_step_us, worst_start_lateness_us, dropped_s;
} rth_stream_figures;

/* A UDP socket towards the server; DESCRIBE is sent (up to 5 tries of timeout_s each) and its
 * reply read.  timeout_s also bounds every later wait (rth_stream_next, rth_stream_stats). */
int rth_stream_open(rth_client **out, const char *host, int port, double timeout_s);
const rth_stream_info *rth_stream_info_of(const rth_client *c);
/* COMMAND with sequence number seq (records as rth_step's); sends, waits for nothing. */
int rth_stream_command(rth_client *c, uint32_t seq, const rth_load *loads, uint32_t n_loads,
                       const rth_control *controls, uint32_t n_controls,
                       const rth_joint_force *joint_forces, uint32_t n_joint_forces);
int rth_stream_subscribe(rth_client *c);          /* SUBSCRIBE */
/* The next state (then rth_last_state); tick, command_seq, status may be NULL. */
int rth_stream_next(rth_client *c, uint64_t *tick, uint32_t *command_seq, uint32_t *status);
/* STATS; states that arrive meanwhile update rth_last_state. */
int rth_stream_stats(rth_client *c, rth_stream_figures *out);

#ifdef __cplusplus
}
#endif
#endif
