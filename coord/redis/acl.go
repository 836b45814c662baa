package redis

import "strings"

// ACLRules returns the Redis 7 ACL rules (the arguments of ACL SETUSER after
// the user name and its password) for a Rune process using key prefix
// prefix ("" for DefaultPrefix): every key under the prefix, and only the
// data, scripting and connection commands Rune uses — no administration
// (CONFIG, FLUSHALL, KEYS, DEBUG, ...), no pub/sub channels.
//
// Workers, schedulers and the master share the same keys (an execution's
// state is written by all three), so one rule set serves every role; give
// each role its own user so that one can be revoked alone.
func ACLRules(prefix string) []string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	// The key pattern is a glob: its special characters are escaped.
	glob := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(prefix)
	return []string{
		"on", "resetkeys", "~" + glob + ":*", "resetchannels",
		"-@all", "+@read", "+@write", "+@scripting", "+@transaction", "+@connection", "-@dangerous",
	}
}
