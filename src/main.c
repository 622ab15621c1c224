/* main.c - the vitrain command line (being built: see issue 3). */
#include <stdio.h>

#include "kernels.h"

int main(void) {
    char err[256];
    if (vt_kernels_init(err, sizeof err)) { fprintf(stderr, "vitrain: %s\n", err); return 2; }
    fprintf(stderr, "vitrain: kernels %s\n", vt_k.name);
    return 0;
}
