/* options.c: mbexec's command line: getopt_long, then one validation block.
 *
 * Parsing stops at the first non-option word, so `mbexec ls -la` passes -la
 * to ls. Nothing here touches the network or the mount.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ident.h"
#include "common/util.h"
#include "shim/guest.h"
#include "shim/result.h"
#include "shim/mbexec.h"

enum {
	OPT_MOUNT = 256,
	OPT_SH,
	OPT_TIMEOUT,
	OPT_MODE,
	OPT_ATTACH,
	OPT_JSON,
	OPT_KEY_FILE,
	OPT_PROFILE,
	OPT_NO_WAIT_OUTPUT,
};

static const struct option longopts[] = {
	{ "cwd", required_argument, NULL, 'C' },
	{ "mount", required_argument, NULL, OPT_MOUNT },
	{ "sh", required_argument, NULL, OPT_SH },
	{ "env", required_argument, NULL, 'e' },
	{ "interactive", no_argument, NULL, 'i' },
	{ "no-stdin", no_argument, NULL, 'n' },
	{ "tty", no_argument, NULL, 't' },
	{ "no-tty", no_argument, NULL, 'T' },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "attach", required_argument, NULL, OPT_ATTACH },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "no-wait-output", no_argument, NULL, OPT_NO_WAIT_OUTPUT },
	{ "key-file", required_argument, NULL, OPT_KEY_FILE },
	{ "profile", required_argument, NULL, OPT_PROFILE },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static const char usage_text[] =
	"usage: mbexec [options] [--] CMD [ARG...]\n"
	"       mbexec [options] --sh 'SCRIPT'\n"
	"\n"
	"Run CMD in the Mainbrella sandbox of the mbfs mount that contains the\n"
	"current directory, in the matching remote directory, as if it ran locally.\n"
	"\n"
	"  -C, --cwd DIR        run in DIR: a local path inside the mount, or an\n"
	"                       absolute remote path\n"
	"      --mount DIR      the mount to use when the current directory is\n"
	"                       outside it\n"
	"      --sh SCRIPT      run SCRIPT with /bin/sh -lc instead of an argv\n"
	"  -e, --env NAME=VALUE set a variable; -e NAME copies the local value\n"
	"  -i, --interactive    forward stdin even when it is a terminal\n"
	"  -n, --no-stdin       never forward stdin\n"
	"  -t, --tty            run in a pseudo-terminal\n"
	"  -T, --no-tty         never use a pseudo-terminal\n"
	"      --timeout DUR    end the command after DUR (30, 500ms, 2m, 1h); exit 124\n"
	"      --mode MODE      auto (default), exec or managed\n"
	"      --json           capture the output, print one JSON result at the end\n"
	"                       (each stream up to 8 MiB; bytes that are not\n"
	"                       UTF-8 become U+FFFD; fields in mbexec(1))\n"
	"      --no-wait-output return when the command exits, without waiting\n"
	"                       for its background jobs to close stdout/stderr\n"
	"      --key-file FILE  read the API key from FILE\n"
	"      --profile NAME   the key file of profile NAME in\n"
	"                       ~/.config/mainbrella/config (default\n"
	"                       $MAINBRELLA_PROFILE, else the profile of the\n"
	"                       mount's URL)\n"
	"      --attach RUN_ID  follow a run whose mbexec lost contact: the rest of\n"
	"                       its output, then its exit status\n"
	"  -v, --verbose        log the requests made (twice: more)\n"
	"  -h, --help           show this help\n"
	"  -V, --version        show the version\n"
	"\n"
	"Exit status: the command's; 128+N when it died of signal N; 124 after\n"
	"--timeout; 125 usage or configuration error (nothing was sent); 255\n"
	"transport, API or quota error (stderr says whether the command may have run).\n";

/* Through mbx_error(), so that --json's "error" says it too. */
static int usage_error(const char *fmt, const char *arg)
{
	char msg[1024];

	snprintf(msg, sizeof(msg), fmt, arg);
	mbx_error("%s", msg);
	fprintf(stderr, "Try 'mbexec --help' for more information.\n");
	return MBX_EXIT_USAGE;
}

/* getopt_long said '?': an unknown option, or one without its argument
 * (optopt is the short letter or the long option's value, 0 if unknown). */
static int bad_option(const char *word)
{
	char letter[2] = { (char)optopt, 0 };

	if (optopt == 'C' || optopt == 'e')
		return usage_error("option -%s needs an argument", letter);
	if (optopt >= OPT_MOUNT && strchr(word, '='))
		return usage_error("option '%s' takes no argument", word);
	if (optopt >= OPT_MOUNT)
		return usage_error("option '%s' needs an argument", word);
	if (optopt > 0 && optopt < 128)
		return usage_error("unknown option -%s", letter);
	return usage_error("unknown option '%s'", word);
}

/* ^[A-Za-z_][A-Za-z0-9_]{0,63}$, as the service requires of env names. */
static int valid_env_name(const char *s, size_t n)
{
	size_t i;

	if (n < 1 || n > 64)
		return 0;
	if (!(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') ||
	      (s[0] >= 'a' && s[0] <= 'z')))
		return 0;
	for (i = 1; i < n; i++) {
		char c = s[i];

		if (!(c == '_' || (c >= 'A' && c <= 'Z') ||
		      (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			return 0;
	}
	return 1;
}

/* -e NAME=VALUE or -e NAME (the local value; skipped when unset, as
 * docker does). Returns 0 or MBX_EXIT_USAGE. */
static int add_env(struct mbx_opts *o, const char *arg)
{
	const char *eq = strchr(arg, '=');
	size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
	char *item, **v;

	if (!valid_env_name(arg, n))
		return usage_error("invalid variable name in -e '%s' (want "
				   "[A-Za-z_][A-Za-z0-9_]*, at most 64 characters)",
				   arg);
	if (eq) {
		item = strdup(arg);
	} else {
		const char *val = getenv(arg);

		if (!val)
			return 0;
		if (asprintf(&item, "%s=%s", arg, val) < 0)
			item = NULL;
	}
	v = item ? realloc(o->env, (o->nenv + 2) * sizeof(*v)) : NULL;
	if (!v) {
		free(item);
		fprintf(stderr, "%s: out of memory\n", MBX_PROG);
		return MBX_EXIT_USAGE;
	}
	v[o->nenv++] = item;
	v[o->nenv] = NULL;
	o->env = v;
	return 0;
}

int mbx_opts_parse(int argc, char **argv, struct mbx_opts *o)
{
	const char *timeout_arg = NULL;
	int c, rc;

	memset(o, 0, sizeof(*o));
	o->tty = -1;
	o->mode = MBX_MODE_AUTO;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+C:e:intTvhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'C':
			o->cwd = optarg;
			break;
		case OPT_MOUNT:
			o->mount = optarg;
			break;
		case OPT_SH:
			o->sh = optarg;
			break;
		case 'e':
			rc = add_env(o, optarg);
			if (rc)
				return rc;
			break;
		case 'i':
			o->interactive = true;
			break;
		case 'n':
			o->no_stdin = true;
			break;
		case 't':
			if (o->tty == 0)
				return usage_error("%s", "-t and -T conflict");
			o->tty = 1;
			break;
		case 'T':
			if (o->tty == 1)
				return usage_error("%s", "-t and -T conflict");
			o->tty = 0;
			break;
		case OPT_TIMEOUT:
			timeout_arg = optarg;
			break;
		case OPT_MODE:
			if (!strcmp(optarg, "auto"))
				o->mode = MBX_MODE_AUTO;
			else if (!strcmp(optarg, "exec"))
				o->mode = MBX_MODE_EXEC;
			else if (!strcmp(optarg, "managed"))
				o->mode = MBX_MODE_MANAGED;
			else
				return usage_error("invalid --mode '%s' (want auto, "
						   "exec or managed)", optarg);
			break;
		case OPT_ATTACH:
			o->attach = optarg;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_NO_WAIT_OUTPUT:
			o->no_wait_output = true;
			break;
		case OPT_KEY_FILE:
			o->key_file = optarg;
			break;
		case OPT_PROFILE:
			o->profile = optarg;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf("mbexec %s\n", MB_VERSION);
			return 0;
		default:
			return bad_option(argv[optind - 1]);
		}
	}
	o->argv = argv + optind;
	o->argc = argc - optind;

	/* The one validation block: every conflict, before anything is sent. */
	if (timeout_arg && mb_parse_duration_ms(timeout_arg, &o->timeout_ms))
		return usage_error("invalid --timeout '%s' (examples: 30, 500ms, "
				   "2m, 1h)", timeout_arg);
	if (o->attach) {
		size_t i, n = strlen(o->attach);

		for (i = 0; i < n && isxdigit((unsigned char)o->attach[i]); i++)
			;
		if (n != MBX_RUNID_HEX || i != n)
			return usage_error("invalid --attach '%s' (a run id: 16 hex "
					   "digits, as printed when contact was lost)",
					   o->attach);
		if (o->argc > 0 || o->sh || o->tty == 1 || o->interactive ||
		    o->mode == MBX_MODE_MANAGED)
			return usage_error("%s", "--attach follows a run already "
					   "started: no command, --sh, -t, -i or "
					   "--mode managed");
		return -1;
	}
	if (o->sh && o->argc > 0)
		return usage_error("--sh takes the whole script; got extra "
				   "argument '%s'", o->argv[0]);
	if (!o->sh && o->argc == 0)
		return usage_error("%s", "no command given");
	if (o->sh && !*o->sh)
		return usage_error("%s", "--sh needs a non-empty script");
	if (o->argc > 0 && !*o->argv[0])
		return usage_error("%s", "the command name is empty");
	if (o->no_stdin && o->interactive)
		return usage_error("%s", "-n (never forward stdin) and -i "
				   "(forward stdin) conflict");
	if (o->tty == 1 && o->json)
		return usage_error("%s", "--json captures the output and cannot "
				   "be used with -t");
	if (o->cwd && !*o->cwd)
		return usage_error("%s", "-C needs a directory");
	if (o->mount && !*o->mount)
		return usage_error("%s", "--mount needs a directory");
	if (o->profile && !*o->profile)
		return usage_error("%s", "--profile needs a name");
	return -1;
}

void mbx_opts_release(struct mbx_opts *o)
{
	size_t i;

	for (i = 0; i < o->nenv; i++)
		free(o->env[i]);
	free(o->env);
	o->env = NULL;
	o->nenv = 0;
}
