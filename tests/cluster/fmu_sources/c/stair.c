/* No continuous state, time events only: counter = 1 + the number of ticks so far (a tick
   every `period` s); the model asks to terminate at the tick where counter reaches stop_at. */
static const int STATES[1] = {0};

static void m_evaluate(Model *m) {}
static void m_derivatives(Model *m, double *dx) {}
static void m_indicators(Model *m, double *z) {}

static bool m_event(Model *m) {
    double eps = 1e-9 * V(period);
    if (m->t >= V(counter) * V(period) - eps) V(counter) = V(counter) + 1.0;
    if (V(counter) >= V(stop_at)) m->terminate = true;
    m->next_event_defined = true;
    m->next_event = V(counter) * V(period);
    return false;
}

static bool m_step_event(Model *m) { return false; }
