/* status.h: `mbfs --status [--wait] MOUNTPOINT`: what a mount has not put
 * on the sandbox yet, for a person (the control file's "writeback" and
 * "kept", control.h). Runs in the calling process; talks to the mount
 * only through its control file, never to the service.
 */
#ifndef MBFS_STATUS_H
#define MBFS_STATUS_H

/* The whole command (argv holds "--status"). Exit status: 0; 1 when
 * --wait saw a failure (a file kept instead of uploaded); 2 on a usage
 * error or when MOUNTPOINT is not an mbfs mount. */
int mbfs_status_main(int argc, char **argv);

#endif
