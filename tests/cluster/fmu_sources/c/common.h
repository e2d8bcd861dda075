/* What the FMI 2.0 and 3.0 shims share: the modes, where a variable may be set, the event
   update and the fixed-step co-simulation algorithm. Included once by each shim after the
   model file. */
#ifndef COMMON_H
#define COMMON_H

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef enum { M_INSTANTIATED, M_CONFIG, M_INIT, M_EVENT, M_CONT, M_STEP, M_TERMINATED } Mode;

/* NULL if variable vr may be set in mode, else why not. */
static const char *not_settable(int vr, Mode mode) {
    switch (KIND[vr]) {
    case K_CONT_INPUT:
        return mode == M_TERMINATED ? "after termination" : NULL;
    case K_DISC_INPUT:
        return (mode == M_INSTANTIATED || mode == M_INIT || mode == M_EVENT || mode == M_STEP)
                   ? NULL : "only after instantiation, in initialization mode or event mode";
    case K_TUNABLE:
        return (mode == M_INSTANTIATED || mode == M_INIT || mode == M_EVENT || mode == M_STEP)
                   ? NULL : "only after instantiation, in initialization mode or event mode";
    case K_STRUCT:
        return (mode == M_INSTANTIATED || mode == M_CONFIG)
                   ? NULL : "only after instantiation or in configuration mode";
    case K_PARAM:
    case K_STATE:
        return (mode == M_INSTANTIATED || mode == M_INIT)
                   ? NULL : "only after instantiation or in initialization mode";
    default:
        return "never (it is an output or a local variable)";
    }
}

/* Check a set call of n value references: in range, settable now; a message says why not. */
static int check_set(Model *m, const unsigned *vr, size_t n, Mode mode) {
    char buf[256];
    for (size_t i = 0; i < n; i++) {
        if (vr[i] >= NV) {
            snprintf(buf, sizeof buf, "Unknown value reference %u", vr[i]);
            log_error(m, buf);
            return 0;
        }
        const char *why = not_settable(vr[i], mode);
        if (why) {
            snprintf(buf, sizeof buf, "Variable %s can be set %s", NAMES[vr[i]], why);
            log_error(m, buf);
            return 0;
        }
    }
    return 1;
}

/* The start values of the String and Binary variables (START_TEXT, vars.h). */
static void init_text(Model *m) {
    for (int i = 0; i < NV; i++) {
        size_t n = START_TEXT_LEN[i] < TEXT_MAX ? START_TEXT_LEN[i] : TEXT_MAX - 1;
        memcpy(m->text[i], START_TEXT[i], n);
        m->text[i][n] = 0;
        m->text_len[i] = n;
    }
}

/* Set text variable vr to n bytes (cut to TEXT_MAX - 1); 0 with a message if it cannot be
   set now. */
static int set_text(Model *m, unsigned vr, const char *value, size_t n, Mode mode) {
    if (!check_set(m, &vr, 1, mode)) return 0;
    if (n > TEXT_MAX - 1) n = TEXT_MAX - 1;
    memcpy(m->text[vr], value, n);
    m->text[vr][n] = 0;
    m->text_len[vr] = n;
    return 1;
}

/* Number of values the n value references hold (arrays count their elements). */
static size_t n_values(const Model *m, const unsigned *vr, size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += vr[i] < NV ? (size_t)var_size(m, vr[i]) : 1;
    return total;
}

/* The event iteration of the shims' own co-simulation: update until the model is stable. */
static void event_update(Model *m) {
    for (int i = 0; i < 100 && m_event(m); i++) m_evaluate(m);
    m_evaluate(m);
}

/* Co-simulation: explicit Euler steps of at most CS_H from m->t to t_end, stopping at time
   events, state events (indicator sign changes at a step's end) and step events; returns 1 if
   the model asked to terminate (m->t is then the time it did). */
static int cs_advance(Model *m, double t_end) {
    double x[NX + 1], dx[NX + 1], z0[NZ + 1], z1[NZ + 1];
    double eps = 1e-12 * (fabs(t_end) > 1.0 ? fabs(t_end) : 1.0);
    while (m->t < t_end - eps) {
        double t_next = m->t + CS_H < t_end ? m->t + CS_H : t_end;
        int time_event = 0;
        if (m->next_event_defined && m->next_event <= t_next + eps) {
            t_next = m->next_event;
            time_event = 1;
        }
        m_indicators(m, z0);
        m_derivatives(m, dx);
        for (int i = 0; i < NX; i++) x[i] = m->v[STATES[i]] + (t_next - m->t) * dx[i];
        for (int i = 0; i < NX; i++) m->v[STATES[i]] = x[i];
        m->t = t_next;
        m_evaluate(m);
        m_indicators(m, z1);
        int state_event = 0;
        for (int i = 0; i < NZ; i++)
            if ((z0[i] < 0 && z1[i] >= 0) || (z0[i] > 0 && z1[i] <= 0)) state_event = 1;
        if (time_event || state_event || m_step_event(m)) {
            m->next_event_defined = false;
            event_update(m);
            if (m->terminate) return 1;
        }
    }
    m->t = t_end;
    return 0;
}

#endif
