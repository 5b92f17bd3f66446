/* config.h: the configuration file of mbfs and mbexec, with profiles.
 *
 * $XDG_CONFIG_HOME/mainbrella/config (default ~/.config/mainbrella/config):
 *
 *   # comment (a line whose first non-blank is '#' or ';')
 *   [NAME]                       NAME: [A-Za-z0-9_.-], 1..63 characters
 *   url = https://api.mainbrella.com
 *   key_file = ~/.config/mainbrella/api-key
 *
 * Known keys: url, key_file. The key itself never goes in this file ("key"
 * is refused with a hint). A value runs to the end of the line, trimmed;
 * "~/" at its start is $HOME, a relative key_file is relative to the
 * file's directory. Every line of the file is checked, whichever profile
 * is used: a bad line, an unknown or repeated key, a setting before the
 * first [NAME] or a repeated [NAME] is an error naming FILE:LINE. The file
 * must be owned by you (or root) and not writable by group or others: it
 * says where the key is sent, so such a file is refused, as ssh does.
 *
 * This module reads the file; cred.h decides what wins over it.
 */
#ifndef MB_CONFIG_H
#define MB_CONFIG_H

#include "err.h"

#define MB_CONFIG_NAME_MAX 64
#define MB_CONFIG_AT_MAX 4200   /* "FILE:LINE" */

/* One profile; a field is "" when the profile does not set it. */
struct mb_profile {
	char name[MB_CONFIG_NAME_MAX];      /* "" when no profile applies */
	char url[512];
	char key_file[4096];                /* absolute after expansion */
	char url_at[MB_CONFIG_AT_MAX];      /* where url was set: "FILE:LINE" */
	char key_file_at[MB_CONFIG_AT_MAX];
};

/* The path of the configuration file (it may not exist). 0, or -ENOENT
 * when neither $XDG_CONFIG_HOME nor $HOME is an absolute path. */
int mb_config_path(char *out, size_t n);

/* Choose and read a profile into *p.
 *
 * name: the profile asked for on the command line, or NULL; then
 * $MAINBRELLA_PROFILE when set and not empty. A named profile must exist
 * (else an error naming the file and the profiles it has).
 * With no name: when url is given (the URL in use, from an option, the
 * environment or a mount), the profile whose url is that one, [default]
 * first, then in file order (a profile without url stands for the
 * built-in default URL); without url, [default]. None of them, or no
 * file: 0 with p->name "" (nothing set).
 * Returns 0 or -errno with err filled; *p is written only on success. */
int mb_config_select(const char *name, const char *url, struct mb_profile *p,
		     struct mb_err *err);

/* 1 when URLs a and b name the same service (case-insensitive, trailing
 * slashes ignored). */
int mb_config_same_url(const char *a, const char *b);

#endif
