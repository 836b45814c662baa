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
