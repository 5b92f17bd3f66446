/* umount.h: `mbfs -u [--timeout T] MOUNTPOINT`: an unmount that first
 * puts everything on the sandbox, and says what it could not.
 *
 * Asks the mount (its control file's "sync") to send what it holds back
 * and waits, a progress line on stderr when it is a terminal; while the
 * sandbox does not answer, the daemon retries (backing off) and this
 * waits, up to T (default: the mount's op_timeout) of no answer, then
 * names what is pending and returns without unmounting: nothing is lost.
 * Once nothing is pending: fusermount3 -u, a wait for the daemon's end,
 * and what it could not send (kept/, with where), from its last record
 * (unsent.h), which is removed since it has been said.
 */
#ifndef MBFS_UMOUNT_H
#define MBFS_UMOUNT_H

/* The whole command (argv holds "-u"). Exit status: 0 everything is on
 * the sandbox and it is unmounted; 1 something could not be sent (kept,
 * the generation is gone: unmounted) or is still pending (still
 * mounted), or the unmount failed; 2 a usage error or MOUNTPOINT is not
 * an mbfs mount. */
int mbfs_umount_main(int argc, char **argv);

#endif
