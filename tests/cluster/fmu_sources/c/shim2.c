/* FMI 2.0 (model exchange and co-simulation) around a model of model.h.
   Build: gcc -shared -fPIC -I<fmpy c-code> -I<dir of vars.h> -DMODEL='"model.c"' shim2.c */
#include <stdarg.h>
#include <stdlib.h>

#include "fmi2Functions.h"
#include "vars.h"
#include "model.h"
#include MODEL
#include "common.h"

typedef struct {
    Model m;
    Mode mode;
    fmi2CallbackFunctions cb;
    char name[128];
    int discarded;            /* the last doStep ended early at a termination request */
} Inst;

static fmi2Status fail(Inst *s, const char *fn) {
    s->cb.logger(s->cb.componentEnvironment, s->name, fmi2Error, "logError", "%s: %s", fn,
                 s->m.message);
    s->m.error = 0;
    return fmi2Error;
}

#define CHECK(fn) if (s->m.error) return fail(s, fn)

const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }
fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String cat[]) {
    return fmi2OK;
}

fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid,
                              fmi2String resources, const fmi2CallbackFunctions *cb,
                              fmi2Boolean visible, fmi2Boolean logging) {
    Inst *s = calloc(1, sizeof(Inst));
    s->cb = *cb;
    snprintf(s->name, sizeof s->name, "%s", name);
    memcpy(s->m.v, START, sizeof START);
    init_text(&s->m);
    s->mode = M_INSTANTIATED;
    return s;
}

void fmi2FreeInstance(fmi2Component c) { free(c); }

fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tolDefined, fmi2Real tol,
                               fmi2Real start, fmi2Boolean stopDefined, fmi2Real stop) {
    ((Inst *)c)->m.t = start;
    return fmi2OK;
}

fmi2Status fmi2EnterInitializationMode(fmi2Component c) {
    Inst *s = c;
    s->mode = M_INIT;
    m_evaluate(&s->m);
    return fmi2OK;
}

fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    Inst *s = c;
    m_evaluate(&s->m);
    CHECK("fmi2ExitInitializationMode");
    /* Model exchange: the initial event iteration follows; co-simulation runs it in its
       first doStep. */
    s->mode = M_EVENT;
    return fmi2OK;
}

fmi2Status fmi2Terminate(fmi2Component c) { ((Inst *)c)->mode = M_TERMINATED; return fmi2OK; }

fmi2Status fmi2Reset(fmi2Component c) {
    Inst *s = c;
    memset(&s->m, 0, sizeof s->m);
    memcpy(s->m.v, START, sizeof START);
    init_text(&s->m);
    s->mode = M_INSTANTIATED;
    return fmi2OK;
}

static fmi2Status get(Inst *s, const fmi2ValueReference vr[], size_t n, double *out) {
    m_evaluate(&s->m);
    for (size_t i = 0; i < n; i++) {
        if (vr[i] >= NV) return fmi2Error;
        out[i] = s->m.v[vr[i]];
    }
    return fmi2OK;
}

fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Real v[]) {
    return get(c, vr, n, v);
}

fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                          fmi2Integer v[]) {
    double tmp[n + 1];
    fmi2Status st = get(c, vr, n, tmp);
    for (size_t i = 0; i < n; i++) v[i] = (fmi2Integer)tmp[i];
    return st;
}

fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                          fmi2Boolean v[]) {
    double tmp[n + 1];
    fmi2Status st = get(c, vr, n, tmp);
    for (size_t i = 0; i < n; i++) v[i] = tmp[i] != 0.0;
    return st;
}

fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                         fmi2String v[]) {
    Inst *s = c;
    m_evaluate(&s->m);
    for (size_t i = 0; i < n; i++) v[i] = vr[i] < NV ? s->m.text[vr[i]] : "";
    return fmi2OK;
}

static fmi2Status set(Inst *s, const fmi2ValueReference vr[], size_t n, const double *in,
                      const char *fn) {
    if (!check_set(&s->m, vr, n, s->mode)) return fail(s, fn);
    for (size_t i = 0; i < n; i++) s->m.v[vr[i]] = in[i];
    return fmi2OK;
}

fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                       const fmi2Real v[]) {
    return set(c, vr, n, v, "fmi2SetReal");
}

fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                          const fmi2Integer v[]) {
    double tmp[n + 1];
    for (size_t i = 0; i < n; i++) tmp[i] = v[i];
    return set(c, vr, n, tmp, "fmi2SetInteger");
}

fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                          const fmi2Boolean v[]) {
    double tmp[n + 1];
    for (size_t i = 0; i < n; i++) tmp[i] = v[i] != 0;
    return set(c, vr, n, tmp, "fmi2SetBoolean");
}

fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                         const fmi2String v[]) {
    Inst *s = c;
    for (size_t i = 0; i < n; i++)
        if (!set_text(&s->m, vr[i], v[i], strlen(v[i]), s->mode)) return fail(s, "fmi2SetString");
    return fmi2OK;
}

/* FMU state: a copy of the model. */
fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *st) {
    Model *copy = *st ? (Model *)*st : malloc(sizeof(Model));
    *copy = ((Inst *)c)->m;
    *st = copy;
    return fmi2OK;
}
fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate st) {
    ((Inst *)c)->m = *(Model *)st;
    return fmi2OK;
}
fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *st) {
    free(*st);
    *st = NULL;
    return fmi2OK;
}
fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate st, size_t *size) {
    *size = sizeof(Model);
    return fmi2OK;
}
fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate st, fmi2Byte buf[], size_t n) {
    memcpy(buf, st, sizeof(Model));
    return fmi2OK;
}
fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte buf[], size_t n,
                                   fmi2FMUstate *st) {
    Model *copy = malloc(sizeof(Model));
    memcpy(copy, buf, sizeof(Model));
    *st = copy;
    return fmi2OK;
}
fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu,
                                        const fmi2ValueReference z[], size_t nz,
                                        const fmi2Real dz[], fmi2Real dv[]) {
    return fmi2Error;
}

/* -- model exchange -------------------------------------------------------------------- */

fmi2Status fmi2EnterEventMode(fmi2Component c) { ((Inst *)c)->mode = M_EVENT; return fmi2OK; }

fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *info) {
    Inst *s = c;
    s->m.next_event_defined = false;
    int again = m_event(&s->m);
    m_evaluate(&s->m);
    info->newDiscreteStatesNeeded = again;
    info->terminateSimulation = s->m.terminate;
    info->nominalsOfContinuousStatesChanged = fmi2False;
    info->valuesOfContinuousStatesChanged = fmi2True;
    info->nextEventTimeDefined = s->m.next_event_defined;
    info->nextEventTime = s->m.next_event;
    return fmi2OK;
}

fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) {
    ((Inst *)c)->mode = M_CONT;
    return fmi2OK;
}

fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetPrior,
                                       fmi2Boolean *enterEventMode, fmi2Boolean *terminate) {
    Inst *s = c;
    *enterEventMode = m_step_event(&s->m);
    *terminate = fmi2False;
    return fmi2OK;
}

fmi2Status fmi2SetTime(fmi2Component c, fmi2Real t) { ((Inst *)c)->m.t = t; return fmi2OK; }

fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx) {
    Inst *s = c;
    for (size_t i = 0; i < nx; i++) s->m.v[STATES[i]] = x[i];
    return fmi2OK;
}

fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real dx[], size_t nx) {
    Inst *s = c;
    m_evaluate(&s->m);
    m_derivatives(&s->m, dx);
    return fmi2OK;
}

fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real z[], size_t nz) {
    Inst *s = c;
    m_evaluate(&s->m);
    m_indicators(&s->m, z);
    return fmi2OK;
}

fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    Inst *s = c;
    for (size_t i = 0; i < nx; i++) x[i] = s->m.v[STATES[i]];
    return fmi2OK;
}

fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    for (size_t i = 0; i < nx; i++) x[i] = 1.0;
    return fmi2OK;
}

/* -- co-simulation --------------------------------------------------------------------- */

fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                       const fmi2Integer order[], const fmi2Real v[]) {
    return fmi2Error;
}
fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                        const fmi2Integer order[], fmi2Real v[]) {
    return fmi2Error;
}

fmi2Status fmi2DoStep(fmi2Component c, fmi2Real t, fmi2Real h, fmi2Boolean noSetPrior) {
    Inst *s = c;
    if (s->mode == M_EVENT) {           /* the first step: the initial event update */
        s->m.next_event_defined = false;
        event_update(&s->m);
    }
    s->mode = M_STEP;
    if (s->discarded) return fmi2Error;
    if (cs_advance(&s->m, t + h)) {
        s->discarded = 1;
        s->cb.logger(s->cb.componentEnvironment, s->name, fmi2Discard, "logStatusDiscard",
                     "the model terminated at t = %g", s->m.t);
        return fmi2Discard;
    }
    return fmi2OK;
}

fmi2Status fmi2CancelStep(fmi2Component c) { return fmi2Error; }
fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind k, fmi2Status *v) {
    return fmi2Error;
}
fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind k, fmi2Real *v) {
    if (k != fmi2LastSuccessfulTime) return fmi2Error;
    *v = ((Inst *)c)->m.t;
    return fmi2OK;
}
fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind k, fmi2Integer *v) {
    return fmi2Error;
}
fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind k, fmi2Boolean *v) {
    if (k != fmi2Terminated) return fmi2Error;
    *v = ((Inst *)c)->discarded;
    return fmi2OK;
}
fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind k, fmi2String *v) {
    return fmi2Error;
}
