/* A stand-in for libtensorflowlite_c.so with the C API's symbols (tensorflow/lite/core/c/c_api.h): one int8
 * input [1, 8] copied to one int8 output [1, 8]; every call is logged so the test can check the sequence.
 * -DFAIL_ALLOCATE makes TfLiteInterpreterAllocateTensors fail (as an Edge TPU runtime too old for the model);
 * -DFAIL_INVOKE_AFTER=N makes every TfLiteInterpreterInvoke after the first N fail (a device unplugged mid-run). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stub_log.h"

typedef struct TfLiteModel { size_t size; } TfLiteModel;
typedef struct TfLiteInterpreterOptions { int* delegate; int threads; } TfLiteInterpreterOptions;
typedef struct TfLiteTensor { int type; int dims[2]; size_t bytes; const char* name; unsigned char data[8]; } TfLiteTensor;
typedef struct TfLiteInterpreter { TfLiteTensor in, out; int* delegate; } TfLiteInterpreter;

const char* TfLiteVersion(void) { return "2.99.0-stub"; }
TfLiteModel* TfLiteModelCreate(const void* data, size_t size) {
    stub_log("TfLiteModelCreate %zu", size);
    if (!data || size < 8 || memcmp((const char*)data + 4, "TFL3", 4) != 0) return NULL;
    TfLiteModel* m = malloc(sizeof *m);
    m->size = size;
    return m;
}
void TfLiteModelDelete(TfLiteModel* m) { stub_log("TfLiteModelDelete"); free(m); }
TfLiteInterpreterOptions* TfLiteInterpreterOptionsCreate(void) {
    stub_log("TfLiteInterpreterOptionsCreate");
    return calloc(1, sizeof(TfLiteInterpreterOptions));
}
void TfLiteInterpreterOptionsDelete(TfLiteInterpreterOptions* o) { stub_log("TfLiteInterpreterOptionsDelete"); free(o); }

void TfLiteInterpreterOptionsAddDelegate(TfLiteInterpreterOptions* o, void* d) {
    stub_log("TfLiteInterpreterOptionsAddDelegate magic=%x", d ? *(int*)d : 0);
    o->delegate = d;
}
TfLiteInterpreter* TfLiteInterpreterCreate(const TfLiteModel* m, const TfLiteInterpreterOptions* o) {
    stub_log("TfLiteInterpreterCreate delegate=%s", o && o->delegate ? "yes" : "no");
    if (!m) return NULL;
    TfLiteInterpreter* i = calloc(1, sizeof *i);
    TfLiteTensor t = {9, {1, 8}, 8, "input", {0}};
    i->in = t;
    t.name = "output";
    i->out = t;
    i->delegate = o ? o->delegate : NULL;
    return i;
}
void TfLiteInterpreterDelete(TfLiteInterpreter* i) { stub_log("TfLiteInterpreterDelete"); free(i); }
int TfLiteInterpreterAllocateTensors(TfLiteInterpreter* i) {
    (void)i;
    stub_log("TfLiteInterpreterAllocateTensors");
#ifdef FAIL_ALLOCATE
    return 1;
#else
    return 0;
#endif
}
int32_t TfLiteInterpreterGetInputTensorCount(const TfLiteInterpreter* i) { (void)i; return 1; }
int32_t TfLiteInterpreterGetOutputTensorCount(const TfLiteInterpreter* i) { (void)i; return 1; }
TfLiteTensor* TfLiteInterpreterGetInputTensor(const TfLiteInterpreter* i, int32_t k) { return k == 0 ? (TfLiteTensor*)&i->in : NULL; }
const TfLiteTensor* TfLiteInterpreterGetOutputTensor(const TfLiteInterpreter* i, int32_t k) { return k == 0 ? &i->out : NULL; }
int TfLiteInterpreterInvoke(TfLiteInterpreter* i) {
    stub_log("TfLiteInterpreterInvoke");
#ifdef FAIL_INVOKE_AFTER
    static int calls = 0;
    if (++calls > FAIL_INVOKE_AFTER) return 1;
#endif
    if (!i->delegate || *i->delegate != 0xED6E) return 1; /* the delegate must be the one libedgetpu made */
    memcpy(i->out.data, i->in.data, 8);
    return 0;
}
int TfLiteTensorType(const TfLiteTensor* t) { return t->type; }
int32_t TfLiteTensorNumDims(const TfLiteTensor* t) { (void)t; return 2; }
int32_t TfLiteTensorDim(const TfLiteTensor* t, int32_t k) { return t->dims[k]; }
size_t TfLiteTensorByteSize(const TfLiteTensor* t) { return t->bytes; }
const char* TfLiteTensorName(const TfLiteTensor* t) { return t->name; }
int TfLiteTensorCopyFromBuffer(TfLiteTensor* t, const void* p, size_t n) {
    if (n != t->bytes) return 1;
    memcpy(t->data, p, n);
    return 0;
}
int TfLiteTensorCopyToBuffer(const TfLiteTensor* t, void* p, size_t n) {
    if (n != t->bytes) return 1;
    memcpy(p, t->data, n);
    return 0;
}
