#!/bin/sh
# unstage.sh: remove what failed uploads and killed downloads left on the guest (parts and pieces directories, half-joined files).
#
# Usage: unstage.sh PATH...
# Removes each PATH, recursively; one already gone counts as removed.
# Prints nothing; exits 0 when every PATH is gone, else 1 with rm's message.
# The PATHs come from the journal's staging notes (fuse/journal_stage.c):
# /tmp/.mbfs-up/RANDOM, TARGETDIR/.mbfs-up-RANDOM and /tmp/.mbfs-dl-RANDOM, noted before they
# were made, so that a crash or a lost service still gets them removed,
# by the next upload that succeeds (fuse/xfer_up.c) or the next mount
# (fuse/recover.c).
rm -rf -- "$@"
