/* x' = u, sampled by time events every `period`: the event iteration first counts the tick
   (n), then, in a second iteration, holds x and accumulates the discrete input d (so an
   importer that does not iterate lags one tick). Terminates at tick stop_at. A step event
   is requested after every integrator step that leaves |x| above `limit` (counted by the FMU
   as requested and as served in event mode). */
static const int STATES[NX] = {VR_x};

static void m_evaluate(Model *m) { V(der_x) = V(u); }

static void m_derivatives(Model *m, double *dx) {
    m_evaluate(m);
    dx[0] = V(der_x);
}

static void m_indicators(Model *m, double *z) {}

static bool m_event(Model *m) {
    bool again = false;
    double eps = 1e-9 * V(period);
    if (V(stage) == 1.0) {                     /* second iteration of a tick */
        V(held) = V(x);
        V(acc) = V(acc) + V(d);
        V(stage) = 0.0;
        if (V(n) >= V(stop_at)) m->terminate = true;
    } else if (m->t >= (V(n) + 1.0) * V(period) - eps) {
        V(n) = V(n) + 1.0;
        V(stage) = 1.0;
        again = true;
    }
    if (V(pending) != 0.0) {                   /* a step event asked for */
        V(served) = V(served) + 1.0;
        V(pending) = 0.0;
    }
    m->next_event_defined = true;
    m->next_event = (V(n) + 1.0) * V(period);
    return again;
}

static bool m_step_event(Model *m) {
    if (fabs(V(x)) > V(limit)) {
        V(requested) = V(requested) + 1.0;
        V(pending) = 1.0;
        return true;
    }
    return false;
}
