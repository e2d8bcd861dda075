/* Counts the ticks of its time-based input clock `tick` (FMI 3.0): each tick adds the input
   u to `total` and increments `count` in the event update that follows it. */
#define N_CLOCKS 1
static const unsigned CLOCKS[1] = {VR_tick};
static const double CLOCK_INTERVALS[1] = {0.3};

static const int STATES[1] = {0};

static void m_evaluate(Model *m) {}
static void m_derivatives(Model *m, double *dx) {}
static void m_indicators(Model *m, double *z) {}

static void m_clock_tick(Model *m, int i) { V(ticked) = 1.0; }

static bool m_event(Model *m) {
    if (V(ticked) != 0.0) {
        V(count) = V(count) + 1.0;
        V(total) = V(total) + V(u);
        V(ticked) = 0.0;
    }
    return false;
}

static bool m_step_event(Model *m) { return false; }
