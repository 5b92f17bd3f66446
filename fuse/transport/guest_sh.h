/* guest_sh.h: the guest scripts of fuse/guest/, embedded at build time by
 * common/embed.sh (each is the text of the file of the same name; read
 * them there). Linked from the generated fuse_sh.c.
 */
#ifndef MBFS_GUEST_SH_H
#define MBFS_GUEST_SH_H

extern const char mbfs_sh_apply[];    /* a batch of small files (wbsend.c) */
extern const char mbfs_sh_follow[];   /* stats of open files (face/follow.c) */
extern const char mbfs_sh_join[];     /* parts of an upload into place (xfer_up.c) */
extern const char mbfs_sh_mux[];      /* the wait of a shared poll (agent.c) */
extern const char mbfs_sh_ns[];       /* a checked namespace change (remote.c) */
extern const char mbfs_sh_pack[];     /* small files of a tree in one archive (prefetch.c) */
extern const char mbfs_sh_split[];    /* pieces of a download (xfer_pieces.c) */
extern const char mbfs_sh_statfs[];   /* df of the mounted root (remote.c) */
extern const char mbfs_sh_touch[];    /* a batch of utimens (touch.c) */
extern const char mbfs_sh_unstage[];  /* staging that failed uploads left (xfer_up.c, recover.c) */
extern const char mbfs_sh_version[];  /* checksum of all of them */

#endif
