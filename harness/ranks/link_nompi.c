/* link_nompi.c: a build without MPI (link.h): a job launched by mpirun or srun is refused with
 * one line saying how to build with it. */
#include "harness/ranks/link.h"

bool ab_link_have_mpi(void) { return false; }

ab_status ab_link_open_mpi(const ab_waits_t *w, ab_link_t **out, ab_diag_t *diag) {
  (void)w;
  *out = NULL;
  return ab_diag_set(diag, AB_ERR_INVALID,
                     "started by mpirun or srun, but this allocbench was built without MPI (install libopenmpi-dev "
                     "and build again), or launch with torchrun");
}
