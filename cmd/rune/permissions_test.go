package main

import (
	"strings"
	"testing"

	"github.com/rune-org/rune/broker/amqp"
)

func TestPermissionsPrintsTheRoleCommands(t *testing.T) {
	t.Parallel()
	for _, role := range []string{amqp.RoleWorker, amqp.RoleMaster, amqp.RoleScheduler} {
		code, out, stderr := runCLI(t, nil, "permissions", "--role", role, "--prefix", "acme", "--vhost", "prod")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", role, code, stderr)
		}
		c, w, r := amqp.PermissionsFor(role, "acme.")
		want := "rabbitmqctl set_permissions -p prod rune-" + role + " '" + c + "' '" + w + "' '" + r + "'"
		if !strings.Contains(out, want) {
			t.Errorf("%s: output lacks\n%s\ngot:\n%s", role, want, out)
		}
		if !strings.Contains(out, "redis-cli ACL SETUSER rune-"+role+" '>PASSWORD' on resetkeys '~acme:*'") {
			t.Errorf("%s: no Redis ACL for the prefix's keys:\n%s", role, out)
		}
	}
	if code, _, stderr := runCLI(t, nil, "permissions", "--role", "admin"); code != exitInvalid || !strings.Contains(stderr, `unknown role "admin"`) {
		t.Errorf("--role admin: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, nil, "permissions"); code != exitInvalid || !strings.Contains(stderr, "--role is required") {
		t.Errorf("no --role: exit %d, %s", code, stderr)
	}
}

// TestPermissionsVhostOfTheURL: without --vhost, the commands are for the
// virtual host of the RabbitMQ URL the processes use.
func TestPermissionsVhostOfTheURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"RUNE_AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/prod"}, nil, "set_permissions -p prod rune-worker"},
		{map[string]string{"RUNE_AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/"}, nil, "set_permissions -p / rune-worker"},
		{nil, []string{"--amqp", "amqp://h1:5672/a%2Fb,amqp://h2:5672/a%2Fb"}, "set_permissions -p a/b rune-worker"},
		{map[string]string{"RUNE_AMQP_URL": "amqp://127.0.0.1:5672/prod"}, []string{"--vhost", "other"}, "set_permissions -p other rune-worker"},
		{nil, nil, "set_permissions -p rune rune-worker"},
	} {
		code, out, stderr := runCLI(t, c.env, append([]string{"permissions", "--role", "worker"}, c.args...)...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v %v: exit %d, want %q in\n%s%s", c.env, c.args, code, c.want, out, stderr)
		}
	}
}
