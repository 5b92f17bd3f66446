/* guest_sh.h: the guest scripts of shim/guest/, embedded at build time by
 * common/embed.sh (each is the text of the file of the same name; read them
 * there). Linked from the generated guest_sh.c.
 */
#ifndef MBX_GUEST_SH_H
#define MBX_GUEST_SH_H

extern const char mbx_sh_lib[];       /* shared: rep, dispatch, alive */
extern const char mbx_sh_launch[];    /* start a run once, report */
extern const char mbx_sh_poll[];      /* report from offsets, long poll */
extern const char mbx_sh_signal[];    /* INT / TERM a run */
extern const char mbx_sh_resize[];    /* a pty run's window size */
extern const char mbx_sh_heartbeat[]; /* the client is alive */
extern const char mbx_sh_cleanup[];   /* remove a finished run */
extern const char mbx_sh_cut[];       /* stdout into 1 MiB pieces */
extern const char mbx_sh_sup[];       /* installed: the guest supervisor */
extern const char mbx_sh_run[];       /* installed: one run */
extern const char mbx_sh_version[];   /* checksum of all of them */

#endif
