/* An array state (FMI 3.0): x' = -k .* x + g * u element-wise, k = (1, 2, 3), g = 2 if the
   Boolean structural parameter `doubled` is true, else 1; y = x. */
static const int STATES[NX] = {VR_x, VR_x + 1, VR_x + 2};

static void m_evaluate(Model *m) {
    double g = V(doubled) != 0.0 ? 2.0 : 1.0;
    for (int i = 0; i < 3; i++) {
        m->v[VR_der_x + i] = -(i + 1.0) * m->v[VR_x + i] + g * m->v[VR_u + i];
        m->v[VR_y + i] = m->v[VR_x + i];
    }
}

static void m_derivatives(Model *m, double *dx) {
    m_evaluate(m);
    for (int i = 0; i < 3; i++) dx[i] = m->v[VR_der_x + i];
}

static void m_indicators(Model *m, double *z) {}
static bool m_event(Model *m) { return false; }
static bool m_step_event(Model *m) { return false; }
