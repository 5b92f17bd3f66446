/* bulk.h: large stdout at the speed of the files route. When megabytes of
 * a run's stdout wait on the guest, execs cut them into 1 MiB files
 * (shim/guest/cut.sh), a batch ahead, and parallel GETs fetch them, instead
 * of polls that carry 640 KiB of base64 each. Exec strategy only.
 */
#ifndef MBX_BULK_H
#define MBX_BULK_H

#include "shim/exec_int.h"

/* Pending stdout from which the bulk path is worth its extra exec. */
#define MBX_BULK_MIN (2u * 1048576)

/* Fetch and deliver, in order, every whole MiB of the stdout waiting beyond
 * st->out_off (st->out_size says how much there is). 0 when some was
 * delivered, or -errno when the caller should go on with polls (logged). */
int mbx_bulk_fetch(struct mbx_run *r, struct mbx_exec_state *st);

#endif
