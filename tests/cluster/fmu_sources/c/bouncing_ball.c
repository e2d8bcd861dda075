/* A ball falling from h under gravity g, bouncing with restitution e: a state event at h = 0
   (event indicator z = h) resets v <- -e v. */
static const int STATES[NX] = {VR_h, VR_v};

static void m_evaluate(Model *m) {
    V(der_h) = V(v);
    V(der_v) = -V(g);
    V(z) = V(h);
}

static void m_derivatives(Model *m, double *dx) {
    m_evaluate(m);
    dx[0] = V(der_h);
    dx[1] = V(der_v);
}

static void m_indicators(Model *m, double *z) { z[0] = V(h); }

static bool m_event(Model *m) {
    if (V(h) <= 0.0 && V(v) < 0.0) {
        V(h) = 0.0;
        V(v) = -V(e) * V(v);
    }
    return false;
}

static bool m_step_event(Model *m) { return false; }
