package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker/amqp"
	coordredis "github.com/rune-org/rune/coord/redis"
)

// cmdPermissions prints the commands that give a role exactly the RabbitMQ
// permissions and Redis ACL it needs (docs/operations.md).
func cmdPermissions(_ context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("permissions", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	role := fs.String("role", "", "worker, master or scheduler (required)")
	prefix := fs.String("prefix", env.getenv("RUNE_PREFIX"), "the deployment's prefix (env RUNE_PREFIX)")
	amqpURL := fs.String("amqp", env.getenv("RUNE_AMQP_URL"), "RabbitMQ URL (env RUNE_AMQP_URL) whose virtual host --vhost defaults to")
	vhost := fs.String("vhost", "", "RabbitMQ virtual host (default: the one of --amqp, else rune)")
	user := fs.String("user", "", "user name (default rune-<role>)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune permissions --role worker|master|scheduler [--prefix P] [--vhost V] [--user U]\n\nPrints the rabbitmqctl and Redis ACL commands that give the role what it needs and nothing else.")
		fs.PrintDefaults()
	}
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	switch *role {
	case amqp.RoleWorker, amqp.RoleMaster, amqp.RoleScheduler:
	case "":
		return usagef("--role is required: worker, master or scheduler")
	default:
		return usagef("--role: unknown role %q: want worker, master or scheduler", *role)
	}
	if *user == "" {
		*user = "rune-" + *role
	}
	if *vhost == "" {
		v, err := urlVhost(*amqpURL)
		if err != nil {
			return usagef("--amqp: %v", err)
		}
		*vhost = v
	}
	qprefix := ""
	if *prefix != "" {
		qprefix = *prefix + "."
	}
	c, w, r := amqp.PermissionsFor(*role, qprefix)
	q := shellQuote
	fmt.Fprintf(env.stdout, "# RabbitMQ: the %s role", *role)
	if *prefix != "" {
		fmt.Fprintf(env.stdout, ", prefix %q", *prefix)
	}
	fmt.Fprintln(env.stdout, " (configure, write, read)")
	fmt.Fprintf(env.stdout, "rabbitmqctl add_user %s 'PASSWORD'\n", q(*user))
	fmt.Fprintf(env.stdout, "rabbitmqctl set_permissions -p %s %s %s %s %s\n", q(*vhost), q(*user), q(c), q(w), q(r))
	fmt.Fprintln(env.stdout, "# Redis 7 ACL: the keys of the prefix, data and scripting commands only")
	fmt.Fprintf(env.stdout, "redis-cli ACL SETUSER %s '>PASSWORD' %s\n", q(*user), strings.Join(mapStrings(coordredis.ACLRules(*prefix), q), " "))
	return nil
}

// urlVhost is the virtual host of the first of a list of AMQP URLs ("/"
// for a URL without a path, as the client connects), "rune" without a URL.
func urlVhost(urls string) (string, error) {
	first, _, _ := strings.Cut(urls, ",")
	if first == "" {
		return "rune", nil
	}
	u, err := amqp091.ParseURI(first)
	if err != nil {
		return "", err
	}
	return u.Vhost, nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func mapStrings(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}
