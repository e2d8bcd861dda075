/* FMI 3.0 (model exchange and co-simulation) around a model of model.h.
   Build: gcc -shared -fPIC -I<fmpy c-code> -I<dir of vars.h> -DMODEL='"model.c"' shim3.c
   Functions a test never needs are stubs that return fmi3Error (fmpy loads every symbol). */
#include <stdlib.h>

#include "fmi3PlatformTypes.h"
#include "vars.h"
#include "model.h"
#include MODEL
#include "common.h"

typedef enum { fmi3OK, fmi3Warning, fmi3Discard, fmi3Error, fmi3Fatal } fmi3Status;
typedef void (*fmi3LogMessageCallback)(fmi3InstanceEnvironment, fmi3Status, fmi3String,
                                       fmi3String);

typedef struct {
    Model m;
    Mode mode;
    fmi3LogMessageCallback log;
    fmi3InstanceEnvironment env;
    int cs;
} Inst;

static fmi3Status fail(Inst *s, const char *fn) {
    char buf[400];
    snprintf(buf, sizeof buf, "%s: %s", fn, s->m.message);
    s->log(s->env, fmi3Error, "logError", buf);
    s->m.error = 0;
    return fmi3Error;
}

#define CHECK(fn) if (s->m.error) return fail(s, fn)
#define STUB(name) int name() { return fmi3Error; }

const char *fmi3GetVersion(void) { return "3.0"; }
fmi3Status fmi3SetDebugLogging(fmi3Instance c, fmi3Boolean on, size_t n, const fmi3String cat[]) {
    return fmi3OK;
}

static Inst *make(fmi3String name, fmi3InstanceEnvironment env, fmi3LogMessageCallback log) {
    Inst *s = calloc(1, sizeof(Inst));
    s->log = log;
    s->env = env;
    memcpy(s->m.v, START, sizeof START);
    init_text(&s->m);
    s->mode = M_INSTANTIATED;
    return s;
}

fmi3Instance fmi3InstantiateModelExchange(fmi3String name, fmi3String token,
                                          fmi3String resources, fmi3Boolean visible,
                                          fmi3Boolean logging, fmi3InstanceEnvironment env,
                                          fmi3LogMessageCallback log) {
    return make(name, env, log);
}

fmi3Instance fmi3InstantiateCoSimulation(fmi3String name, fmi3String token,
                                         fmi3String resources, fmi3Boolean visible,
                                         fmi3Boolean logging, fmi3Boolean eventModeUsed,
                                         fmi3Boolean earlyReturnAllowed,
                                         const fmi3ValueReference required[], size_t nRequired,
                                         fmi3InstanceEnvironment env,
                                         fmi3LogMessageCallback log, void *intermediateUpdate) {
    Inst *s = make(name, env, log);
    s->cs = 1;
    return s;
}

fmi3Instance fmi3InstantiateScheduledExecution() { return NULL; }

void fmi3FreeInstance(fmi3Instance c) { free(c); }

fmi3Status fmi3EnterConfigurationMode(fmi3Instance c) {
    ((Inst *)c)->mode = M_CONFIG;
    return fmi3OK;
}
fmi3Status fmi3ExitConfigurationMode(fmi3Instance c) {
    ((Inst *)c)->mode = M_INSTANTIATED;
    return fmi3OK;
}

fmi3Status fmi3EnterInitializationMode(fmi3Instance c, fmi3Boolean tolDefined, fmi3Float64 tol,
                                       fmi3Float64 start, fmi3Boolean stopDefined,
                                       fmi3Float64 stop) {
    Inst *s = c;
    s->m.t = start;
    s->mode = M_INIT;
    m_evaluate(&s->m);
    return fmi3OK;
}

fmi3Status fmi3ExitInitializationMode(fmi3Instance c) {
    Inst *s = c;
    m_evaluate(&s->m);
    CHECK("fmi3ExitInitializationMode");
    if (s->cs) {                    /* co-simulation: the initial event update, then steps */
        s->m.next_event_defined = false;
        event_update(&s->m);
        s->mode = M_STEP;
    } else {
        s->mode = M_EVENT;
    }
    return fmi3OK;
}

fmi3Status fmi3EnterEventMode(fmi3Instance c) { ((Inst *)c)->mode = M_EVENT; return fmi3OK; }
fmi3Status fmi3Terminate(fmi3Instance c) { ((Inst *)c)->mode = M_TERMINATED; return fmi3OK; }
fmi3Status fmi3Reset(fmi3Instance c) {
    Inst *s = c;
    memset(&s->m, 0, sizeof s->m);
    memcpy(s->m.v, START, sizeof START);
    init_text(&s->m);
    s->mode = M_INSTANTIATED;
    return fmi3OK;
}

/* Get/set of every numeric type: values are held as doubles, arrays element by element. */
static fmi3Status get(Inst *s, const fmi3ValueReference vr[], size_t nvr, double *out,
                      size_t nValues, const char *fn) {
    char buf[128];
    size_t need = n_values(&s->m, vr, nvr);
    if (nValues < need) {
        snprintf(buf, sizeof buf, "Expected nValues >= %zu but was %zu", need, nValues);
        log_error(&s->m, buf);
        return fail(s, fn);
    }
    m_evaluate(&s->m);
    size_t k = 0;
    for (size_t i = 0; i < nvr; i++)
        for (int j = 0; j < var_size(&s->m, vr[i]); j++) out[k++] = s->m.v[vr[i] + j];
    return fmi3OK;
}

static fmi3Status set(Inst *s, const fmi3ValueReference vr[], size_t nvr, const double *in,
                      size_t nValues, const char *fn) {
    char buf[128];
    if (!check_set(&s->m, vr, nvr, s->mode)) return fail(s, fn);
    size_t need = n_values(&s->m, vr, nvr);
    if (nValues != need) {
        snprintf(buf, sizeof buf, "Expected nValues = %zu but was %zu", need, nValues);
        log_error(&s->m, buf);
        return fail(s, fn);
    }
    size_t k = 0;
    for (size_t i = 0; i < nvr; i++)
        for (int j = 0; j < var_size(&s->m, vr[i]); j++) s->m.v[vr[i] + j] = in[k++];
    return fmi3OK;
}

#define ACCESS(T, CT)                                                                          \
    fmi3Status fmi3Get##T(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,          \
                          CT values[], size_t nValues) {                                       \
        double tmp[nValues + 1];                                                               \
        fmi3Status st = get(c, vr, nvr, tmp, nValues, "fmi3Get" #T);                           \
        for (size_t i = 0; st == fmi3OK && i < nValues; i++) values[i] = (CT)tmp[i];           \
        return st;                                                                             \
    }                                                                                          \
    fmi3Status fmi3Set##T(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,          \
                          const CT values[], size_t nValues) {                                 \
        double tmp[nValues + 1];                                                               \
        for (size_t i = 0; i < nValues; i++) tmp[i] = (double)values[i];                       \
        return set(c, vr, nvr, tmp, nValues, "fmi3Set" #T);                                    \
    }

ACCESS(Float32, fmi3Float32)
ACCESS(Float64, fmi3Float64)
ACCESS(Int8, fmi3Int8)
ACCESS(UInt8, fmi3UInt8)
ACCESS(Int16, fmi3Int16)
ACCESS(UInt16, fmi3UInt16)
ACCESS(Int32, fmi3Int32)
ACCESS(UInt32, fmi3UInt32)
ACCESS(Int64, fmi3Int64)
ACCESS(UInt64, fmi3UInt64)
ACCESS(Boolean, fmi3Boolean)

fmi3Status fmi3GetString(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,
                         fmi3String values[], size_t nValues) {
    Inst *s = c;
    m_evaluate(&s->m);
    for (size_t i = 0; i < nvr && i < nValues; i++)
        values[i] = vr[i] < NV ? s->m.text[vr[i]] : "";
    return fmi3OK;
}

fmi3Status fmi3SetString(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,
                         const fmi3String values[], size_t nValues) {
    Inst *s = c;
    for (size_t i = 0; i < nvr && i < nValues; i++)
        if (!set_text(&s->m, vr[i], values[i], strlen(values[i]), s->mode))
            return fail(s, "fmi3SetString");
    return fmi3OK;
}

fmi3Status fmi3GetBinary(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,
                         size_t sizes[], fmi3Binary values[], size_t nValues) {
    Inst *s = c;
    m_evaluate(&s->m);
    for (size_t i = 0; i < nvr && i < nValues; i++) {
        values[i] = (fmi3Binary)(vr[i] < NV ? s->m.text[vr[i]] : "");
        sizes[i] = vr[i] < NV ? s->m.text_len[vr[i]] : 0;
    }
    return fmi3OK;
}

fmi3Status fmi3SetBinary(fmi3Instance c, const fmi3ValueReference vr[], size_t nvr,
                         const size_t sizes[], const fmi3Binary values[], size_t nValues) {
    Inst *s = c;
    for (size_t i = 0; i < nvr && i < nValues; i++)
        if (!set_text(&s->m, vr[i], (const char *)values[i], sizes[i], s->mode))
            return fail(s, "fmi3SetBinary");
    return fmi3OK;
}
STUB(fmi3GetNumberOfVariableDependencies)
STUB(fmi3GetVariableDependencies)
STUB(fmi3GetDirectionalDerivative)
STUB(fmi3GetAdjointDerivative)
STUB(fmi3GetIntervalFraction)
STUB(fmi3GetShiftDecimal)
STUB(fmi3GetShiftFraction)
STUB(fmi3SetIntervalDecimal)
STUB(fmi3SetIntervalFraction)
STUB(fmi3SetShiftDecimal)
STUB(fmi3SetShiftFraction)
STUB(fmi3EvaluateDiscreteStates)
STUB(fmi3GetOutputDerivatives)
STUB(fmi3ActivateModelPartition)

/* Clocks: a model with input clocks defines CLOCKS (their value references), N_CLOCKS and
   CLOCK_INTERVALS; setting one ticks it for the next event update. */
#ifndef N_CLOCKS
#define N_CLOCKS 0
static const unsigned CLOCKS[1] = {0};
static const double CLOCK_INTERVALS[1] = {0};
static void m_clock_tick(Model *m, int i) {}
#endif

fmi3Status fmi3GetClock(fmi3Instance c, const fmi3ValueReference vr[], size_t n,
                        fmi3Clock values[]) {
    for (size_t i = 0; i < n; i++) values[i] = false;
    return fmi3OK;
}

fmi3Status fmi3SetClock(fmi3Instance c, const fmi3ValueReference vr[], size_t n,
                        const fmi3Clock values[]) {
    Inst *s = c;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < N_CLOCKS; k++)
            if (CLOCKS[k] == vr[i] && values[i]) m_clock_tick(&s->m, k);
    return fmi3OK;
}

fmi3Status fmi3GetIntervalDecimal(fmi3Instance c, const fmi3ValueReference vr[], size_t n,
                                  fmi3Float64 intervals[], int qualifiers[]) {
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < N_CLOCKS; k++)
            if (CLOCKS[k] == vr[i]) {
                intervals[i] = CLOCK_INTERVALS[k];
                qualifiers[i] = 2;      /* fmi3IntervalChanged */
            }
    return fmi3OK;
}

/* FMU state: a copy of the model. */
fmi3Status fmi3GetFMUState(fmi3Instance c, fmi3FMUState *st) {
    Model *copy = *st ? (Model *)*st : malloc(sizeof(Model));
    *copy = ((Inst *)c)->m;
    *st = copy;
    return fmi3OK;
}
fmi3Status fmi3SetFMUState(fmi3Instance c, fmi3FMUState st) {
    ((Inst *)c)->m = *(Model *)st;
    return fmi3OK;
}
fmi3Status fmi3FreeFMUState(fmi3Instance c, fmi3FMUState *st) {
    free(*st);
    *st = NULL;
    return fmi3OK;
}
fmi3Status fmi3SerializedFMUStateSize(fmi3Instance c, fmi3FMUState st, size_t *size) {
    *size = sizeof(Model);
    return fmi3OK;
}
fmi3Status fmi3SerializeFMUState(fmi3Instance c, fmi3FMUState st, fmi3Byte buf[], size_t n) {
    memcpy(buf, st, sizeof(Model));
    return fmi3OK;
}
fmi3Status fmi3DeserializeFMUState(fmi3Instance c, const fmi3Byte buf[], size_t n,
                                   fmi3FMUState *st) {
    Model *copy = malloc(sizeof(Model));
    memcpy(copy, buf, sizeof(Model));
    *st = copy;
    return fmi3OK;
}

/* -- model exchange -------------------------------------------------------------------- */

fmi3Status fmi3UpdateDiscreteStates(fmi3Instance c, fmi3Boolean *again, fmi3Boolean *terminate,
                                    fmi3Boolean *nominalsChanged, fmi3Boolean *valuesChanged,
                                    fmi3Boolean *nextDefined, fmi3Float64 *next) {
    Inst *s = c;
    s->m.next_event_defined = false;
    *again = m_event(&s->m);
    m_evaluate(&s->m);
    *terminate = s->m.terminate;
    *nominalsChanged = false;
    *valuesChanged = true;
    *nextDefined = s->m.next_event_defined;
    *next = s->m.next_event;
    return fmi3OK;
}

fmi3Status fmi3EnterContinuousTimeMode(fmi3Instance c) {
    ((Inst *)c)->mode = M_CONT;
    return fmi3OK;
}

fmi3Status fmi3CompletedIntegratorStep(fmi3Instance c, fmi3Boolean noSetPrior,
                                       fmi3Boolean *enterEventMode, fmi3Boolean *terminate) {
    Inst *s = c;
    *enterEventMode = m_step_event(&s->m);
    *terminate = false;
    return fmi3OK;
}

fmi3Status fmi3SetTime(fmi3Instance c, fmi3Float64 t) { ((Inst *)c)->m.t = t; return fmi3OK; }

fmi3Status fmi3SetContinuousStates(fmi3Instance c, const fmi3Float64 x[], size_t nx) {
    Inst *s = c;
    for (size_t i = 0; i < nx; i++) s->m.v[STATES[i]] = x[i];
    return fmi3OK;
}

fmi3Status fmi3GetContinuousStateDerivatives(fmi3Instance c, fmi3Float64 dx[], size_t nx) {
    Inst *s = c;
    m_evaluate(&s->m);
    m_derivatives(&s->m, dx);
    return fmi3OK;
}

fmi3Status fmi3GetEventIndicators(fmi3Instance c, fmi3Float64 z[], size_t nz) {
    Inst *s = c;
    m_evaluate(&s->m);
    m_indicators(&s->m, z);
    return fmi3OK;
}

fmi3Status fmi3GetContinuousStates(fmi3Instance c, fmi3Float64 x[], size_t nx) {
    Inst *s = c;
    for (size_t i = 0; i < nx; i++) x[i] = s->m.v[STATES[i]];
    return fmi3OK;
}

fmi3Status fmi3GetNominalsOfContinuousStates(fmi3Instance c, fmi3Float64 x[], size_t nx) {
    for (size_t i = 0; i < nx; i++) x[i] = 1.0;
    return fmi3OK;
}

fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance c, size_t *n) { *n = NZ; return fmi3OK; }
fmi3Status fmi3GetNumberOfContinuousStates(fmi3Instance c, size_t *n) { *n = NX; return fmi3OK; }

/* -- co-simulation --------------------------------------------------------------------- */

fmi3Status fmi3EnterStepMode(fmi3Instance c) { ((Inst *)c)->mode = M_STEP; return fmi3OK; }

fmi3Status fmi3DoStep(fmi3Instance c, fmi3Float64 t, fmi3Float64 h, fmi3Boolean noSetPrior,
                      fmi3Boolean *eventHandlingNeeded, fmi3Boolean *terminate,
                      fmi3Boolean *earlyReturn, fmi3Float64 *lastSuccessfulTime) {
    Inst *s = c;
    *eventHandlingNeeded = false;
    *earlyReturn = false;
    /* A termination request ends the step at its end (no early return). */
    *terminate = cs_advance(&s->m, t + h);
    s->m.t = t + h;
    *lastSuccessfulTime = s->m.t;
    return fmi3OK;
}
