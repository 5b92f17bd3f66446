/* list.h: `mbfs --list` and `mbfs --stop ID@GENERATION`, the sandbox
 * lifecycle commands (what `docker ps` and `docker stop` are to
 * containers).
 *
 * --list prints one line per container generation of the account (one
 * GET /containers, which does not renew idle time): id, generation, size,
 * image, status, hard deadline, idle timeout, and the local mbfs mounts
 * that serve it (mountinfo.h: same API URL, id and generation in their
 * control files); --json prints the same facts as a JSON array. --stop
 * stops one generation (DELETE /containers with id and createdAt), but
 * refuses one mounted here unless --force. Both run in the calling
 * process and mount nothing; neither ever stops a generation it was not
 * given exactly.
 */
#ifndef MBFS_LIST_H
#define MBFS_LIST_H

/* The whole command (argv holds "--list"). Exit status: 0; 1 when the
 * service could not be asked or refused; 2 on a usage error. */
int mbfs_list_main(int argc, char **argv);

/* The whole command (argv holds "--stop"). Exit status: 0 once stopped;
 * 1 when the argument is not ID@GENERATION, that generation is not
 * running, it is mounted here (without --force), or the service refused;
 * 2 on a usage error. */
int mbfs_stop_main(int argc, char **argv);

#endif
