/* rtrigid_hil.c -- C99 reference client of the rtrigid lock-step HIL protocol, version 2 (with
 * its sessions), and of its UDP stream, version 1 (docs/hil/protocol.md).  The C standard
 * library and POSIX sockets only. */
#define _POSIX_C_SOURCE 200809L
#include "rtrigid_hil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

enum { HELLO = 1, STEP = 2, STATE = 3, RESET = 4, SET_STATE = 5, KEEPALIVE = 6, RESUME = 7,
       OBSERVE = 8, REPLY = 0x80, PUSH = 0x89, ERROR = 0xFF, HEADER = 16, STATE_HEAD = 32,
       STATE_WIDTH = 13, SESSION_BLOCK = RTH_TOKEN_SIZE + 8 };

struct rth_client {
    int fd;
    uint32_t seq;
    rth_hello hello;
    unsigned char *hello_buf;    /* HELLO's payload; the strings point into it */
    unsigned char *buf;          /* requests and replies */
    size_t cap;
    double *values;              /* the last state's values */
    rth_state state;
    char error[1024];
    rth_stream_info stream;      /* a stream's (rth_stream_open) */
    uint32_t ask_seq;            /* a stream's last STATS or DESCRIBE */
    int observing;               /* rth_observe succeeded: PUSH messages follow */
};

/* -- little-endian encoding ---------------------------------------------------------------- */
static void put_u16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static void put_u32(unsigned char *p, uint32_t v) {
    int i;
    for (i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    int i;
    for (i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_f64(unsigned char *p, double d) { uint64_t v; memcpy(&v, &d, 8); put_u64(p, v); }
static uint16_t get_u16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static double get_f64(const unsigned char *p) { uint64_t v = get_u64(p); double d; memcpy(&d, &v, 8); return d; }

/* -- transport ------------------------------------------------------------------------------- */
static int reserve(rth_client *c, size_t size) {
    unsigned char *p;
    if (size <= c->cap) return RTH_OK;
    p = (unsigned char *)realloc(c->buf, size);
    if (!p) return RTH_E_NOMEM;
    c->buf = p;
    c->cap = size;
    return RTH_OK;
}

static int send_all(int fd, const unsigned char *p, size_t n) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);  /* EPIPE, not SIGPIPE */
        if (k < 0) {
            if (errno == EINTR) continue;
            return RTH_E_IO;
        }
        p += k;
        n -= (size_t)k;
    }
    return RTH_OK;
}

static int recv_all(int fd, unsigned char *p, size_t n) {
    while (n) {
        ssize_t k = recv(fd, p, n, 0);
        if (k == 0) return RTH_E_CLOSED;
        if (k < 0) {
            if (errno == EINTR) continue;
            return RTH_E_IO;
        }
        p += k;
        n -= (size_t)k;
    }
    return RTH_OK;
}

/* Read one message: its header into head, its payload to c->buf + HEADER (*len bytes).  An
 * ERROR is returned as its code, its message in c->error. */
static int recv_message(rth_client *c, unsigned char head[HEADER], size_t *len) {
    uint32_t length;
    int err = recv_all(c->fd, head, HEADER);
    if (err) return err;
    length = get_u32(head + 12);
    if (memcmp(head, "RTRG", 4) != 0 || head[4] != RTH_VERSION || length > (1u << 24))
        return RTH_E_PROTOCOL;
    if ((err = reserve(c, HEADER + (size_t)length)) != RTH_OK) return err;
    if ((err = recv_all(c->fd, c->buf + HEADER, length)) != RTH_OK) return err;
    *len = length;
    if (head[5] == ERROR) {
        size_t n = length >= 2 ? length - 2 : 0;
        if (n >= sizeof c->error) n = sizeof c->error - 1;
        memcpy(c->error, c->buf + HEADER + 2, n);   /* the message fills the payload */
        c->error[n] = '\0';
        if (length < 2) return RTH_E_PROTOCOL;
        return (int)get_u16(c->buf + HEADER);       /* a notice (seq 0) too: the code says */
    }
    return RTH_OK;
}

/* Send the request whose payload (len bytes) is at c->buf + HEADER; on return the reply's
 * payload is at c->buf + HEADER and its length in *reply_len. */
static int request(rth_client *c, int kind, size_t len, size_t *reply_len) {
    unsigned char head[HEADER];
    int err, sent;
    if (c->observing) return RTH_E_ARG;          /* an observer only receives (rth_observe) */
    c->seq = c->seq % 0xFFFFFFFFu + 1u;          /* seq 0 marks the server's notices */
    memcpy(c->buf, "RTRG", 4);
    c->buf[4] = RTH_VERSION;
    c->buf[5] = (unsigned char)kind;
    put_u16(c->buf + 6, 0);
    put_u32(c->buf + 8, c->seq);
    put_u32(c->buf + 12, (uint32_t)len);
    c->error[0] = '\0';
    sent = send_all(c->fd, c->buf, HEADER + len);
    /* even if sending failed, the server may have said why before it hung up (ERROR 10, 11) */
    err = recv_message(c, head, reply_len);
    if (err > 0) return err;
    if (sent) return sent;
    if (err) return err;
    if (get_u32(head + 8) != c->seq || head[5] != (kind | REPLY)) return RTH_E_PROTOCOL;
    return RTH_OK;
}

/* -- HELLO ------------------------------------------------------------------------------------ */
typedef struct { unsigned char *p; size_t left; int ok; } reader;

static const unsigned char *take(reader *r, size_t n) {
    const unsigned char *p = r->p;
    if (!r->ok || r->left < n) { r->ok = 0; return NULL; }
    r->p += n;
    r->left -= n;
    return p;
}
static uint32_t r_u32(reader *r) { const unsigned char *p = take(r, 4); return p ? get_u32(p) : 0; }
static double r_f64(reader *r) { const unsigned char *p = take(r, 8); return p ? get_f64(p) : 0.0; }
/* A counted string, made NUL-terminated in place: its count's first byte becomes the NUL of
 * the string before it, so the string is moved back by two bytes. */
static const char *r_str(reader *r) {
    const unsigned char *p = take(r, 2);
    uint16_t n;
    char *s;
    if (!p) return "";
    n = get_u16(p);
    if (!take(r, n)) return "";
    s = (char *)p;
    memmove(s, p + 2, n);
    s[n] = '\0';          /* overwrites the first byte after the string, already read past */
    return s;
}

static int read_hello(rth_client *c, size_t len) {
    rth_hello *h = &c->hello;
    reader r;
    uint32_t i;
    /* one spare byte at the end: the last string's terminator */
    c->hello_buf = (unsigned char *)malloc(len + 1);
    if (!c->hello_buf) return RTH_E_NOMEM;
    memcpy(c->hello_buf, c->buf + HEADER, len);
    c->hello_buf[len] = 0;
    r.p = c->hello_buf; r.left = len; r.ok = 1;
    h->n_bodies = r_u32(&r);
    h->dt = r_f64(&r);
    h->max_steps_per_request = r_u32(&r);
    h->n_joints = r_u32(&r);
    h->n_actuators = r_u32(&r);
    h->n_sensors = r_u32(&r);
    h->nq = r_u32(&r);
    h->nv = r_u32(&r);
    if (!r.ok || h->n_bodies > (1u << 20) || h->n_joints > (1u << 20) ||
        h->n_actuators > (1u << 20) || h->n_sensors > (1u << 20))
        return RTH_E_PROTOCOL;
    h->body_names = (const char **)calloc(h->n_bodies + 1, sizeof *h->body_names);
    h->joints = (rth_joint *)calloc(h->n_joints + 1, sizeof *h->joints);
    h->actuators = (rth_actuator *)calloc(h->n_actuators + 1, sizeof *h->actuators);
    h->sensors = (rth_sensor *)calloc(h->n_sensors + 1, sizeof *h->sensors);
    if (!h->body_names || !h->joints || !h->actuators || !h->sensors) return RTH_E_NOMEM;
    h->integrator = r_str(&r);
    h->scenario = r_str(&r);
    for (i = 0; i < h->n_bodies; i++) h->body_names[i] = r_str(&r);
    for (i = 0; i < h->n_joints; i++) {
        rth_joint *j = &h->joints[i];
        j->name = r_str(&r);
        j->kind = r_str(&r);
        j->parent = (int32_t)r_u32(&r);
        j->child = r_u32(&r);
        j->qpos_at = r_u32(&r); j->nq = r_u32(&r);
        j->qvel_at = r_u32(&r); j->nv = r_u32(&r);
        j->lower = r_f64(&r); j->upper = r_f64(&r);
    }
    for (i = 0; i < h->n_actuators; i++) {
        rth_actuator *a = &h->actuators[i];
        a->name = r_str(&r);
        a->kind = r_str(&r);
        a->joint = r_u32(&r);
        a->gear = r_f64(&r);
        a->ctrl_lo = r_f64(&r); a->ctrl_hi = r_f64(&r);
        a->force_lo = r_f64(&r); a->force_hi = r_f64(&r);
    }
    for (i = 0; i < h->n_sensors; i++) {
        rth_sensor *s = &h->sensors[i];
        s->name = r_str(&r);
        s->kind = r_str(&r);
        s->body = r_u32(&r);
        s->point[0] = r_f64(&r); s->point[1] = r_f64(&r); s->point[2] = r_f64(&r);
        s->width = r_u32(&r);
    }
    if (!r.ok) return RTH_E_PROTOCOL;
    if (r.left >= 40) {     /* the limits block; anything after it is ignored */
        h->has_limits = 1;
        h->max_payload = r_u32(&r);
        h->max_clients = r_u32(&r);
        h->idle_timeout = r_f64(&r);
        h->partial_timeout = r_f64(&r);
        h->send_timeout = r_f64(&r);
        h->time_slice = r_f64(&r);
        if (r.left >= SESSION_BLOCK) {   /* the session block, after the limits */
            h->has_session = 1;
            memcpy(h->session, take(&r, RTH_TOKEN_SIZE), RTH_TOKEN_SIZE);
            h->session_grace = r_f64(&r);
        }
    }
    return RTH_OK;
}

static int read_state(rth_client *c, size_t len) {
    const unsigned char *p = c->buf + HEADER;
    rth_state *s = &c->state;
    size_t n, i;
    if (len < STATE_HEAD) return RTH_E_PROTOCOL;
    s->t = get_f64(p);
    s->steps = get_u64(p + 8);
    s->n_bodies = get_u32(p + 16);
    s->nq = get_u32(p + 20);
    s->nv = get_u32(p + 24);
    s->n_sensor_values = get_u32(p + 28);
    n = (size_t)STATE_WIDTH * s->n_bodies + s->nq + s->nv + s->n_sensor_values;
    if (len != STATE_HEAD + 8 * n) return RTH_E_PROTOCOL;
    free(c->values);
    c->values = (double *)malloc((n ? n : 1) * sizeof(double));
    if (!c->values) return RTH_E_NOMEM;
    for (i = 0; i < n; i++) c->values[i] = get_f64(p + STATE_HEAD + 8 * i);
    s->bodies = c->values;
    s->qpos = s->bodies + (size_t)STATE_WIDTH * s->n_bodies;
    s->qvel = s->qpos + s->nq;
    s->sensors = s->qvel + s->nv;
    return RTH_OK;
}

/* -- public ------------------------------------------------------------------------------------ */
int rth_connect(rth_client **out, const char *host, int port) {
    struct addrinfo hints, *res = NULL, *ai;
    char service[16];
    rth_client *c;
    size_t len = 0;
    int err, one = 1;
    if (!out || !host || port <= 0 || port > 65535) return RTH_E_ARG;
    *out = NULL;
    c = (rth_client *)calloc(1, sizeof *c);
    if (!c) return RTH_E_NOMEM;
    c->fd = -1;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &res) != 0) { rth_close(c); return RTH_E_CONNECT; }
    for (ai = res; ai; ai = ai->ai_next) {
        c->fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (c->fd < 0) continue;
        if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        close(c->fd);
        c->fd = -1;
    }
    freeaddrinfo(res);
    if (c->fd < 0) { rth_close(c); return RTH_E_CONNECT; }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if ((err = reserve(c, 1 << 12)) != RTH_OK || (err = request(c, HELLO, 0, &len)) != RTH_OK ||
        (err = read_hello(c, len)) != RTH_OK) {
        rth_close(c);
        return err;
    }
    *out = c;
    return RTH_OK;
}

void rth_close(rth_client *c) {
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    free(c->hello.body_names);
    free(c->hello.joints);
    free(c->hello.actuators);
    free(c->hello.sensors);
    free(c->hello_buf);
    free(c->buf);
    free(c->values);
    free(c);
}

const rth_hello *rth_hello_info(const rth_client *c) { return c ? &c->hello : NULL; }
const rth_state *rth_last_state(const rth_client *c) { return c ? &c->state : NULL; }
const char *rth_last_error(const rth_client *c) { return c ? c->error : ""; }

static int state_request(rth_client *c, int kind, size_t len) {
    size_t reply = 0;
    int err = request(c, kind, len, &reply);
    return err ? err : read_state(c, reply);
}

/* The bytes of the load, control and joint force records; RTH_E_ARG for a bad argument. */
static int records_size(const rth_load *loads, uint32_t n_loads, const rth_control *controls,
                        uint32_t n_controls, const rth_joint_force *joint_forces,
                        uint32_t n_joint_forces, size_t *size) {
    uint32_t i;
    if ((n_loads && !loads) || (n_controls && !controls) || (n_joint_forces && !joint_forces))
        return RTH_E_ARG;
    *size = 52 * (size_t)n_loads + 12 * (size_t)n_controls;
    for (i = 0; i < n_joint_forces; i++) {
        if (joint_forces[i].nv < 1 || joint_forces[i].nv > 6) return RTH_E_ARG;
        *size += 4 + 8 * (size_t)joint_forces[i].nv;
    }
    return RTH_OK;
}

static void put_records(unsigned char *p, const rth_load *loads, uint32_t n_loads,
                        const rth_control *controls, uint32_t n_controls,
                        const rth_joint_force *joint_forces, uint32_t n_joint_forces) {
    size_t at = 0;
    uint32_t i, k;
    for (i = 0; i < n_loads; i++, at += 52) {
        put_u32(p + at, loads[i].body);
        for (k = 0; k < 3; k++) {
            put_f64(p + at + 4 + 8 * k, loads[i].force[k]);
            put_f64(p + at + 28 + 8 * k, loads[i].torque[k]);
        }
    }
    for (i = 0; i < n_controls; i++, at += 12) {
        put_u32(p + at, controls[i].actuator);
        put_f64(p + at + 4, controls[i].value);
    }
    for (i = 0; i < n_joint_forces; i++) {
        put_u32(p + at, joint_forces[i].joint);
        at += 4;
        for (k = 0; k < joint_forces[i].nv; k++, at += 8) put_f64(p + at, joint_forces[i].value[k]);
    }
}

int rth_step(rth_client *c, uint32_t n_steps, const rth_load *loads, uint32_t n_loads,
             const rth_control *controls, uint32_t n_controls,
             const rth_joint_force *joint_forces, uint32_t n_joint_forces) {
    size_t size;
    int err;
    if (!c) return RTH_E_ARG;
    if ((err = records_size(loads, n_loads, controls, n_controls, joint_forces,
                            n_joint_forces, &size)) != RTH_OK)
        return err;
    size += 16;
    if ((err = reserve(c, HEADER + size)) != RTH_OK) return err;
    put_u32(c->buf + HEADER, n_steps);
    put_u32(c->buf + HEADER + 4, n_loads);
    put_u32(c->buf + HEADER + 8, n_controls);
    put_u32(c->buf + HEADER + 12, n_joint_forces);
    put_records(c->buf + HEADER + 16, loads, n_loads, controls, n_controls, joint_forces,
                n_joint_forces);
    return state_request(c, STEP, size);
}

int rth_state_now(rth_client *c) { return c ? state_request(c, STATE, 0) : RTH_E_ARG; }
int rth_reset(rth_client *c) { return c ? state_request(c, RESET, 0) : RTH_E_ARG; }

int rth_set_state(rth_client *c, const double *qpos, const double *qvel) {
    uint32_t nq, nv, i;
    size_t at = HEADER + 8;
    int err;
    if (!c) return RTH_E_ARG;
    nq = qpos ? c->hello.nq : 0;
    nv = qvel ? c->hello.nv : 0;
    if ((err = reserve(c, HEADER + 8 + 8 * ((size_t)nq + nv))) != RTH_OK) return err;
    put_u32(c->buf + HEADER, nq);
    put_u32(c->buf + HEADER + 4, nv);
    for (i = 0; i < nq; i++, at += 8) put_f64(c->buf + at, qpos[i]);
    for (i = 0; i < nv; i++, at += 8) put_f64(c->buf + at, qvel[i]);
    return state_request(c, SET_STATE, 8 + 8 * ((size_t)nq + nv));
}

int rth_keepalive(rth_client *c) {
    size_t len = 0;
    return c ? request(c, KEEPALIVE, 0, &len) : RTH_E_ARG;
}

/* -- sessions -------------------------------------------------------------------------------- */
/* RESUME or OBSERVE of `token`: the reply's state as the last state. */
static int join(rth_client *c, int kind, const uint8_t *token) {
    int err;
    if (!c || !token) return RTH_E_ARG;
    if ((err = reserve(c, HEADER + RTH_TOKEN_SIZE)) != RTH_OK) return err;
    memcpy(c->buf + HEADER, token, RTH_TOKEN_SIZE);
    return state_request(c, kind, RTH_TOKEN_SIZE);
}

int rth_resume(rth_client *c, const uint8_t token[RTH_TOKEN_SIZE]) {
    uint8_t copy[RTH_TOKEN_SIZE];
    int err;
    if (!c || !token) return RTH_E_ARG;
    memcpy(copy, token, RTH_TOKEN_SIZE);         /* token may be c's own hello.session */
    if ((err = join(c, RESUME, copy)) != RTH_OK) return err;
    c->hello.has_session = 1;                    /* the connection's token is the resumed one */
    memcpy(c->hello.session, copy, RTH_TOKEN_SIZE);
    return RTH_OK;
}

int rth_observe(rth_client *c, const uint8_t token[RTH_TOKEN_SIZE]) {
    int err = join(c, OBSERVE, token);
    if (err == RTH_OK) c->observing = 1;
    return err;
}

int rth_observe_next(rth_client *c, uint32_t *seq) {
    unsigned char head[HEADER];
    size_t len = 0;
    int err;
    if (!c || !c->observing) return RTH_E_ARG;
    c->error[0] = '\0';
    /* ERROR 12 with seq 0 (the session expired) comes back as its code */
    if ((err = recv_message(c, head, &len)) != RTH_OK) return err;
    if (head[5] != PUSH) return RTH_E_PROTOCOL;
    if ((err = read_state(c, len)) != RTH_OK) return err;
    if (seq) *seq = get_u32(head + 8);           /* the stepping connection's request */
    return RTH_OK;
}

/* -- streaming over UDP ------------------------------------------------------------------------ */
enum { COMMAND = 1, SUBSCRIBE = 2, STATS = 3, DESCRIBE = 4, STREAM_STATE = 0x81,
       STREAM_HEAD = 16, STREAM_INFO = 28, STATS_SIZE = 136, DATAGRAM_MAX = 65536 };

static void put_datagram_header(unsigned char *p, int kind, uint32_t seq, size_t len) {
    memcpy(p, "RTRU", 4);
    p[4] = RTH_STREAM_VERSION;
    p[5] = (unsigned char)kind;
    put_u16(p + 6, 0);
    put_u32(p + 8, seq);
    put_u32(p + 12, (uint32_t)len);
}

static int send_datagram(rth_client *c, int kind, uint32_t seq, size_t len) {
    put_datagram_header(c->buf, kind, seq, len);
    for (;;) {
        if (send(c->fd, c->buf, HEADER + len, 0) >= 0) return RTH_OK;
        if (errno != EINTR) return RTH_E_IO;
    }
}

/* The next datagram of the stream into c->buf: its kind, seq and payload length.  An ERROR is
 * returned as its code (message in rth_last_error); datagrams of another protocol are skipped. */
static int recv_datagram(rth_client *c, int *kind, uint32_t *seq, size_t *len) {
    for (;;) {
        ssize_t n = recv(c->fd, c->buf, c->cap, 0);
        size_t length;
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return RTH_E_TIMEOUT;
            return RTH_E_IO;
        }
        if ((size_t)n < HEADER || memcmp(c->buf, "RTRU", 4) != 0 ||
            c->buf[4] != RTH_STREAM_VERSION || get_u32(c->buf + 12) != (size_t)n - HEADER)
            continue;
        length = (size_t)n - HEADER;
        *kind = c->buf[5];
        *seq = get_u32(c->buf + 8);
        *len = length;
        if (*kind == ERROR) {
            size_t m = length >= 2 ? length - 2 : 0;
            if (m >= sizeof c->error) m = sizeof c->error - 1;
            memcpy(c->error, c->buf + HEADER + 2, m);
            c->error[m] = '\0';
            return length < 2 ? RTH_E_PROTOCOL : (int)get_u16(c->buf + HEADER);
        }
        return RTH_OK;
    }
}

/* A state datagram's payload (at c->buf + HEADER, len bytes) as the last state. */
static int read_stream_state(rth_client *c, size_t len, uint64_t *tick, uint32_t *command_seq,
                             uint32_t *status) {
    const unsigned char *p = c->buf + HEADER;
    if (len < STREAM_HEAD) return RTH_E_PROTOCOL;
    if (tick) *tick = get_u64(p);
    if (command_seq) *command_seq = get_u32(p + 8);
    if (status) *status = get_u32(p + 12);
    memmove(c->buf + HEADER, c->buf + HEADER + STREAM_HEAD, len - STREAM_HEAD);
    return read_state(c, len - STREAM_HEAD);
}

/* Send an empty request (STATS, DESCRIBE) and wait for its reply; states meanwhile are kept
 * as the last state. */
static int ask(rth_client *c, int kind, size_t *len) {
    int rkind, err;
    uint32_t seq;
    c->ask_seq = c->ask_seq % 0xFFFFFFFFu + 1u;
    if ((err = send_datagram(c, kind, c->ask_seq, 0)) != RTH_OK) return err;
    for (;;) {
        if ((err = recv_datagram(c, &rkind, &seq, len)) != RTH_OK) return err;
        if (rkind == (kind | REPLY) && seq == c->ask_seq) return RTH_OK;
        if (rkind == STREAM_STATE && (err = read_stream_state(c, *len, NULL, NULL, NULL)) != RTH_OK)
            return err;
    }
}

int rth_stream_open(rth_client **out, const char *host, int port, double timeout_s) {
    struct addrinfo hints, *res = NULL, *ai;
    struct timeval tv;
    char service[16];
    rth_client *c;
    size_t len = 0;
    int err = RTH_E_TIMEOUT, tries, size = 1 << 20;
    const unsigned char *info;
    if (!out || !host || port <= 0 || port > 65535 || !(timeout_s > 0.0) || timeout_s > 1e6)
        return RTH_E_ARG;
    *out = NULL;
    c = (rth_client *)calloc(1, sizeof *c);
    if (!c) return RTH_E_NOMEM;
    c->fd = -1;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &res) != 0) { rth_close(c); return RTH_E_CONNECT; }
    for (ai = res; ai; ai = ai->ai_next) {
        c->fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (c->fd < 0) continue;
        /* connected: only the server's datagrams are received */
        if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        close(c->fd);
        c->fd = -1;
    }
    freeaddrinfo(res);
    if (c->fd < 0) { rth_close(c); return RTH_E_CONNECT; }
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    tv.tv_sec = (time_t)timeout_s;
    tv.tv_usec = (suseconds_t)((timeout_s - (double)tv.tv_sec) * 1e6);
    if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if ((err = reserve(c, DATAGRAM_MAX)) != RTH_OK) { rth_close(c); return err; }
    for (tries = 0; tries < 5; tries++) {
        err = ask(c, DESCRIBE, &len);
        if (err != RTH_E_TIMEOUT) break;
    }
    if (err == RTH_OK && len < STREAM_INFO) err = RTH_E_PROTOCOL;
    /* the description of HELLO, then the stream's block (its last 28 bytes) */
    if (err == RTH_OK) {
        info = c->buf + HEADER + len - STREAM_INFO;
        c->stream.rate = get_f64(info);
        c->stream.every = get_u32(info + 8);
        c->stream.watchdog = get_f64(info + 12);
        c->stream.on_silence = get_u32(info + 20);
        c->stream.max_payload = get_u32(info + 24);
        err = read_hello(c, len - STREAM_INFO);
    }
    if (err != RTH_OK) { rth_close(c); return err; }
    *out = c;
    return RTH_OK;
}

const rth_stream_info *rth_stream_info_of(const rth_client *c) { return c ? &c->stream : NULL; }

int rth_stream_command(rth_client *c, uint32_t seq, const rth_load *loads, uint32_t n_loads,
                       const rth_control *controls, uint32_t n_controls,
                       const rth_joint_force *joint_forces, uint32_t n_joint_forces) {
    size_t size;
    int err;
    if (!c) return RTH_E_ARG;
    if ((err = records_size(loads, n_loads, controls, n_controls, joint_forces,
                            n_joint_forces, &size)) != RTH_OK)
        return err;
    if (HEADER + 12 + size > c->cap) return RTH_E_ARG;
    put_u32(c->buf + HEADER, n_loads);
    put_u32(c->buf + HEADER + 4, n_controls);
    put_u32(c->buf + HEADER + 8, n_joint_forces);
    put_records(c->buf + HEADER + 12, loads, n_loads, controls, n_controls, joint_forces,
                n_joint_forces);
    return send_datagram(c, COMMAND, seq, 12 + size);
}

int rth_stream_subscribe(rth_client *c) { return c ? send_datagram(c, SUBSCRIBE, 0, 0) : RTH_E_ARG; }

int rth_stream_next(rth_client *c, uint64_t *tick, uint32_t *command_seq, uint32_t *status) {
    int kind, err;
    uint32_t seq;
    size_t len;
    if (!c) return RTH_E_ARG;
    for (;;) {
        if ((err = recv_datagram(c, &kind, &seq, &len)) != RTH_OK) return err;
        if (kind == STREAM_STATE) return read_stream_state(c, len, tick, command_seq, status);
    }
}

int rth_stream_stats(rth_client *c, rth_stream_figures *out) {
    const unsigned char *p;
    uint64_t counts[13];
    size_t len = 0;
    int err, i;
    if (!c || !out) return RTH_E_ARG;
    if ((err = ask(c, STATS, &len)) != RTH_OK) return err;
    if (len != STATS_SIZE) return RTH_E_PROTOCOL;
    p = c->buf + HEADER;
    for (i = 0; i < 13; i++) counts[i] = get_u64(p + 8 * i);
    out->ticks = counts[0]; out->scheduled_ticks = counts[1]; out->steps = counts[2];
    out->late_ticks = counts[3]; out->folded_ticks = counts[4]; out->overruns = counts[5];
    out->commands_applied = counts[6]; out->commands_superseded = counts[7];
    out->dropped_stale = counts[8]; out->dropped_reordered = counts[9];
    out->dropped_invalid = counts[10]; out->states_sent = counts[11];
    out->watchdog_trips = counts[12];
    out->worst_lateness_us = get_f64(p + 104);
    out->worst_step_us = get_f64(p + 112);
    out->worst_start_lateness_us = get_f64(p + 120);
    out->dropped_s = get_f64(p + 128);
    return RTH_OK;
}
