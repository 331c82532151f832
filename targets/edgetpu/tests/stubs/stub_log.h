/* Appends one line to the call log (LOG_PATH is set by the test when it compiles the stub). */
#include <stdarg.h>
#include <stdio.h>
#ifndef LOG_PATH
#define LOG_PATH "/dev/null"
#endif
static void stub_log(const char* fmt, ...) {
    FILE* f = fopen(LOG_PATH, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}
