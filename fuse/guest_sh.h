/* guest_sh.h: the guest scripts of fuse/guest/, embedded at build time by
 * common/embed.sh (each is the text of the file of the same name; read
 * them there). Linked from the generated fuse_sh.c.
 */
#ifndef MBFS_GUEST_SH_H
#define MBFS_GUEST_SH_H

extern const char mbfs_sh_mux[];      /* the wait of a shared poll (agent.c) */
extern const char mbfs_sh_version[];  /* checksum of all of them */

#endif
